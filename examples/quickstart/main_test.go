package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// readmeBlock returns the body of the n-th (from 0) fenced block of the
// README whose fence names lang.
func readmeBlock(t *testing.T, lang string, n int) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	rest := string(data)
	for i := 0; ; i++ {
		start := strings.Index(rest, "\n```"+lang+"\n")
		require.GreaterOrEqual(t, start, 0, "README.md has no block %d of %s", n, lang)
		rest = rest[start+len("\n```"+lang+"\n"):]
		end := strings.Index(rest, "\n```\n")
		require.GreaterOrEqual(t, end, 0, "README.md: a %s block without its end", lang)
		if i == n {
			return rest[:end+1]
		}
		rest = rest[end:]
	}
}

// TestReadmeShowsThisProgram: the README's Go block is this program (from
// its package clause on), and the text block after it is what it prints.
func TestReadmeShowsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	program := string(src)
	program = program[strings.Index(program, "package main"):]
	require.Equal(t, program, readmeBlock(t, "go", 0), "README.md's program and examples/quickstart/main.go differ")

	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	require.NoError(t, w.Close())
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, readmeBlock(t, "text", 0), string(out), "README.md's output of the program")
}

// TestReadmeMachine: the README's topology JSON is valid and is the
// machine its sentence describes: two sockets of 8 cores of two threads,
// a NUMA node and a GPU on each.
func TestReadmeMachine(t *testing.T) {
	m, err := topology.ParseJSON([]byte(readmeBlock(t, "json", 0)))
	require.NoError(t, err)
	require.Equal(t, 2, m.NumNodes())
	require.Equal(t, 32, m.NumCPUs())
	require.Equal(t, 2, m.ThreadsPerCore())
	gpus := m.GPUs()
	require.Len(t, gpus, 2)
	require.Equal(t, []numa.NodeID{0, 1}, []numa.NodeID{gpus[0].NUMANode, gpus[1].NUMANode})
	for i := range 2 {
		require.Equal(t, i, m.Node(i).Socket, "node %d's socket", i)
		require.Equal(t, 16, m.NodeCPUs(i).Size(), "node %d's CPUs", i)
	}
}
