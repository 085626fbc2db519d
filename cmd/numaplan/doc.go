// Numaplan is the command-line tool of numaplace: it shows machines and
// plays placements on them.
//
// Usage:
//
//	numaplan COMMAND [flags]
//
// The commands are:
//
//	presets
//		List the built-in machines, one a line: the name, then the number
//		of NUMA nodes, sockets, CPUs, GPUs and other devices (such as
//		"8 rdma"). Any name can be given to --preset.
//
//	topology [--preset NAME | --topology FILE | --root DIR] [--json]
//		Show a machine as a text picture (sockets, NUMA nodes with their
//		cores and CPUs, GPUs and devices under their PCIe switch, NUMA
//		sets, distances), or with --json print it in the topology
//		interchange JSON, which --topology reads back. The machine is a
//		preset (--preset), a JSON file (--topology, "-" for standard
//		input, read strictly: unknown, miscased or repeated fields are
//		errors), the Linux system tree under DIR (--root reads DIR/sys as
//		if it were a live system, handy for a copy of another machine's
//		/sys; DIR may also be the sys directory itself) or, with no source
//		flag, this machine (the tree under /). At most one source may be
//		given.
//
//	place [--preset NAME | --topology FILE | --root DIR] [--show]
//		Read operations as JSON Lines on standard input and answer each
//		with one JSON line on standard output, in order:
//		{"op":"allocate","id":"a","cpus":4,"gpus":1,"memoryMiB":0,
//		"policy":"SingleNUMANode","exclusive":"Required","fullPCPUs":false}
//		is answered {"id":"a","ok":true,"cpus":"0-3","gpus":[0],"numaNodes":[0]}
//		(numaNodes is the span, by NUMA node ID; "memoryMiB" by node ID and
//		"devices" by class appear when the request had them);
//		{"op":"release","id":"a"} with {"id":"a","ok":true};
//		{"op":"health","gpu":3,"healthy":false} (or "class" and "device"
//		for other device classes) with {"ok":true,"affected":[...]}, the
//		live allocations that hold the device. Lines are strict JSON: an
//		unknown field (or one the op does not read), a miscased or
//		repeated field or a string that is not valid UTF-8 makes the line
//		invalid, and the error suggests the field meant ("gpu" for
//		"gpus"). A refused request or an invalid line gets
//		{"id":...,"ok":false,"error":"..."} (no id when the line had none
//		or it cannot be read) and processing goes on.
//		{"op":"resize","id":"a","cpus":8} grows or shrinks a live
//		allocation's CPUs in place under its policy's span rule and is
//		answered like an allocation, or refused leaving it unchanged. The
//		exit status is 0 once standard input has been read to its end. --show prints the machine picture with
//		each allocation marked on standard error at the end.
//
//	demo
//		Play the scenario of docs/design.md on the dgx-h100 preset: two
//		text-generation pods (4 GPUs + 24 CPUs, SingleNUMANode) on NUMA
//		nodes 0 and 1, a third refused with its reason, an 8-GPU pod with
//		16 CPUs admitted by Restricted (which the kubelet's restricted
//		policy refuses), a 2-GPU SingleNUMANode pod and a 6-GPU BestEffort
//		pod falling back across both nodes, and the picture.
//
//	simulate [--out DIR] [--nodes N] [--pods P] [--seed S] [--setups a,b,c]
//		Run the cluster simulation: one seeded GPU workload (pods of 1, 2,
//		4 and 8 GPUs with 6-24 CPUs per GPU, a mix of policies, Poisson
//		arrivals, lognormal run times, offered near saturation) through
//		three setups on N nodes, alternately dgx-h100 and dgx-a100: (a) a
//		NUMA-blind scheduler with the kubelet's single-numa-node policy,
//		(b) the same with best-effort (both through the kubelet-compatible
//		hints and merge of adapters/topologymanager), (c) numaplace's scheduler
//		adapter and node agent. It prints a Markdown table (pods placed,
//		AdmissionErrors, cross-NUMA placements, unschedulable and queued
//		pods, GPU allocation, mean wait, scheduling latency p50/p99) and
//		writes it with the run's parameters to DIR/summary.md, the time
//		series to DIR/series.csv and two plots (GPU allocation over time;
//		cumulative AdmissionErrors and cross-NUMA placements) as PNG and
//		SVG. DIR is created if needed; without --out a new folder
//		numaplan-simulate-* under the temporary directory. The default
//		(200 nodes, 5,000 pods) takes seconds; --nodes 10000 --pods 100000
//		is the scale run. A progress line goes to standard error every
//		few seconds. Everything but the latencies is the same for the same
//		flags. The rules (queue, retries, patience, the kubelet emulation,
//		what counts as cross-NUMA) are in the documentation of the
//		internal/sim package.
//
//	help [COMMAND]
//		Print the list of commands, or one command's usage and flags.
//		"numaplan COMMAND -h" prints the same.
//
// Flags may be written with one dash or two (-json, --json).
//
// Exit status: 0 on success; 2 for a usage error (an unknown command, a bad
// or unknown flag, an unexpected argument, an unknown preset, two machine
// sources); 1 when the command cannot do its work, such as a topology file
// or system tree that cannot be read or is not a valid machine (the message
// names the file or directory and says why) or output that cannot be
// written. Errors go to standard error, one line each.
package main
