package topologymanager

// RefMerge is refMerge, for the external test package (the tests over the
// benchmark inputs of topologymanagertest, which imports this package).
var RefMerge = refMerge
