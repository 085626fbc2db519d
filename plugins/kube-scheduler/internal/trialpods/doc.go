// Package trialpods makes the pods of numaplace-scheduler's tests,
// benchmarks and throughput trials: a pod asking for CPUs, memory and
// aliyun.com/gpu under an ACK NUMA policy ([Pod]), and the trials' mix of
// such pods ([Mix]), so that the fake-cluster tests, BenchmarkCycle and
// the throughput trial place the same pods.
package trialpods
