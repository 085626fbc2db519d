// Numaplan is the command-line tool of numaplace: it shows machines and
// (as the allocator lands) plays placements on them.
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
//		input), the Linux system tree under DIR (--root reads DIR/sys as
//		if it were a live system, handy for a copy of another machine's
//		/sys) or, with no source flag, this machine (the tree under /).
//		At most one source may be given.
//
//	demo
//		Play the placement demo on the dgx-h100 preset. For now it prints
//		the machine; the allocation scenario is added as the allocator
//		lands.
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
