// Empty: lets node_test.go declare the device manager constructor it
// reaches with go:linkname without a function body.
