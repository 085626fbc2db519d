package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// result is what one numaplan run printed and returned.
type result struct {
	status         int
	stdout, stderr string
}

func runWith(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	status := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{status: status, stdout: out.String(), stderr: errOut.String()}
}

func runArgs(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, "", args...)
}

func TestNoCommand(t *testing.T) {
	r := runArgs(t)
	assert.Equal(t, exitUsage, r.status)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "no command given")
	assert.Contains(t, r.stderr, "Usage:\n  numaplan COMMAND [flags]")
}

func TestUnknownCommand(t *testing.T) {
	r := runArgs(t, "frobnicate", "--x")
	assert.Equal(t, exitUsage, r.status)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, `unknown command "frobnicate"`)
	assert.Contains(t, r.stderr, "Commands:")
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runArgs(t, args...)
		require.Equal(t, exitOK, r.status, "%v", args)
		assert.Empty(t, r.stderr)
		for _, c := range commands {
			assert.Contains(t, r.stdout, "\n  "+c.name+" ", "%v lists %s", args, c.name)
			assert.Contains(t, r.stdout, c.summary)
		}
	}
}

func TestHelpCommand(t *testing.T) {
	r := runArgs(t, "help", "topology")
	require.Equal(t, exitOK, r.status)
	assert.True(t, strings.HasPrefix(r.stdout,
		"Usage: numaplan topology [--preset NAME | --topology FILE | --root DIR] [--json]\n"))
	for _, f := range []string{"-preset NAME", "-topology FILE", "-root DIR", "-json"} {
		assert.Contains(t, r.stdout, f)
	}
	// The same text for "numaplan topology -h".
	h := runArgs(t, "topology", "-h")
	assert.Equal(t, exitOK, h.status)
	assert.Equal(t, r.stdout, h.stdout)

	r = runArgs(t, "help", "presets")
	assert.Equal(t, exitOK, r.status)
	assert.NotContains(t, r.stdout, "Flags:", "presets has no flags")

	r = runArgs(t, "help", "help")
	assert.Equal(t, exitOK, r.status)
	assert.Contains(t, r.stdout, "Usage: numaplan help [COMMAND]")
}

func TestHelpErrors(t *testing.T) {
	r := runArgs(t, "help", "nope")
	assert.Equal(t, exitUsage, r.status)
	assert.Contains(t, r.stderr, `unknown command "nope"`)

	r = runArgs(t, "help", "topology", "demo")
	assert.Equal(t, exitUsage, r.status)
	assert.Contains(t, r.stderr, "at most one command")
}

func TestBadFlagsAndArguments(t *testing.T) {
	for _, args := range [][]string{
		{"presets", "--json"},
		{"presets", "extra"},
		{"topology", "--bogus"},
		{"topology", "--preset"},
		{"topology", "--preset", "dgx-h100", "extra"},
		{"topology", "--json=maybe"},
		{"demo", "--fast"},
		{"demo", "now"},
	} {
		r := runArgs(t, args...)
		assert.Equal(t, exitUsage, r.status, "%v", args)
		assert.Empty(t, r.stdout, "%v", args)
		assert.Contains(t, r.stderr, "numaplan "+args[0]+": ", "%v", args)
		assert.Contains(t, r.stderr, "Usage: numaplan "+args[0], "%v", args)
	}
}

func TestPanicIsReported(t *testing.T) {
	boom := &command{name: "boom", synopsis: "boom", summary: "panics",
		setup: func(*flag.FlagSet) func(*env) error {
			return func(*env) error { panic("kaboom") }
		}}
	commands = append(commands, boom)
	defer func() { commands = commands[:len(commands)-1] }()
	r := runArgs(t, "boom")
	assert.Equal(t, exitFailure, r.status)
	assert.Contains(t, r.stderr, "numaplan: internal error (please report it): kaboom")
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("device full") }

var _ io.Writer = failingWriter{}

func TestWriteFailure(t *testing.T) {
	for _, args := range [][]string{{"presets"}, {"topology", "--preset", "small-1s"},
		{"topology", "--preset", "small-1s", "--json"}, {"demo"}} {
		var errOut bytes.Buffer
		status := run(args, strings.NewReader(""), failingWriter{}, &errOut)
		assert.Equal(t, exitFailure, status, "%v", args)
		assert.Contains(t, errOut.String(), "writing the output: device full", "%v", args)
	}
}
