// Package draslices builds, for tests and benchmarks of numaplace-scheduler,
// the ResourceSlices numaplace-agent's DRA driver publishes for a machine
// (plugins/agent/dra; the agent is another module, so its code is not
// imported here).
package draslices
