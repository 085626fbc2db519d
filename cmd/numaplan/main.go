package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command could not do its work (an unreadable topology, a failed write)
	exitUsage   = 2 // bad flags, arguments or command names
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// env is what a command may touch: its standard streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one subcommand. setup registers the command's flags on fs and
// returns the function that runs it once the flags are parsed; keeping the
// two apart lets `numaplan help CMD` print the flags without running it.
// The run function's error is reported by [run]: a *usageError exits with
// status 2, any other error with status 1.
type command struct {
	name     string
	synopsis string // the command line after "numaplan "
	summary  string // one line for the command list
	details  string // a paragraph for `numaplan help CMD`
	setup    func(fs *flag.FlagSet) func(e *env) error
}

// commands in the order the help lists them.
var commands []*command

func init() {
	commands = []*command{presetsCommand, topologyCommand, placeCommand, demoCommand, simulateCommand, {
		name:     "help",
		synopsis: "help [COMMAND]",
		summary:  "show this help, or the help of one command",
	}}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usageError is an error in how numaplan was called; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run is numaplan with its arguments (without the program name) and
// streams; it returns the exit status. It never panics: an unexpected panic
// is reported on stderr as an internal error with status 1.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "numaplan: internal error (please report it): %v\n%s", r, debug.Stack())
			status = exitFailure
		}
	}()
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "numaplan: no command given")
		fmt.Fprintln(stderr)
		writeUsage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(e, rest)
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "numaplan: unknown command %s\n\n", quote.Short(name))
		writeUsage(stderr)
		return exitUsage
	}
	fs := flag.NewFlagSet("numaplan "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed below, on the right stream
	runCmd := cmd.setup(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeCommandUsage(stdout, cmd)
			return exitOK
		}
		return usageFailure(e, cmd, err)
	}
	if fs.NArg() > 0 {
		return usageFailure(e, cmd, usagef("unexpected argument %s", quote.Short(fs.Arg(0))))
	}
	if err := runCmd(e); err != nil {
		return fail(e, cmd, err)
	}
	return exitOK
}

// usageFailure reports a usage error of cmd with the command's usage and
// returns status 2.
func usageFailure(e *env, cmd *command, err error) int {
	fmt.Fprintf(e.stderr, "numaplan %s: %v\n\n", cmd.name, err)
	writeCommandUsage(e.stderr, cmd)
	return exitUsage
}

// fail reports err and returns its status: 2 for a usage error, else 1.
func fail(e *env, cmd *command, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(e.stderr, "numaplan %s: %v\nRun 'numaplan help %s' for usage.\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "numaplan %s: %v\n", cmd.name, err)
	return exitFailure
}

func help(e *env, args []string) int {
	switch len(args) {
	case 0:
		writeUsage(e.stdout)
		return exitOK
	case 1:
		cmd := lookup(args[0])
		if cmd == nil {
			fmt.Fprintf(e.stderr, "numaplan help: unknown command %s\n\n", quote.Short(args[0]))
			writeUsage(e.stderr)
			return exitUsage
		}
		writeCommandUsage(e.stdout, cmd)
		return exitOK
	default:
		fmt.Fprintln(e.stderr, "numaplan help: give at most one command")
		return exitUsage
	}
}

func writeUsage(w io.Writer) {
	var sb strings.Builder
	sb.WriteString("numaplan decides which CPUs and GPUs a workload gets on a multi-socket, multi-GPU\n")
	sb.WriteString("machine, so that they share a NUMA node (or the narrowest set of NUMA nodes).\n\n")
	sb.WriteString("Usage:\n  numaplan COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&sb, "  %-10s %s\n", c.name, c.summary)
	}
	sb.WriteString("\nRun 'numaplan help COMMAND' for the flags of a command.\n")
	io.WriteString(w, sb.String())
}

func writeCommandUsage(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "Usage: numaplan %s\n\n%s\n", cmd.synopsis, cmd.summary)
	if cmd.details != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.details)
	}
	if cmd.setup == nil {
		return
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cmd.setup(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}
