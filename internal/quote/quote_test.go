package quote

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShort(t *testing.T) {
	require.Equal(t, `"0-3"`, Short("0-3"))
	require.Equal(t, `"a\x00\n\xff"`, Short("a\x00\n\xff"))
	long := strings.Repeat("x", 1<<20)
	require.Equal(t, `"`+strings.Repeat("x", MaxBytes)+`"... (1048576 bytes)`, Short(long))
	// A cut never splits a character.
	s := strings.Repeat("é", 40) // 80 bytes
	q := Short(s)
	require.Equal(t, `"`+strings.Repeat("é", 32)+`"... (80 bytes)`, q)
	require.Equal(t, "mlx5_0", Bare("mlx5_0"))
	require.Equal(t, `a\tb`, Bare("a\tb"))
	require.Equal(t, strings.Repeat("x", MaxBytes)+"... (1048576 bytes)", Bare(long))
}

func TestCut(t *testing.T) {
	if got := Cut("a[0].b"); got != "a[0].b" {
		t.Errorf("Cut of a short path = %q", got)
	}
	long := strings.Repeat("é", 40) // 80 bytes
	got := Cut(long)
	want := strings.Repeat("é", 32) + "... (80 bytes)"
	if got != want {
		t.Errorf("Cut(80 bytes) = %q, want %q", got, want)
	}
}
