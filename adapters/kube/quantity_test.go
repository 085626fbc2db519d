package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
)

func TestParseMilli(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"24", 24000},
		{"500m", 500},
		{"1.5", 1500},
		{"0.1", 100},
		{"0.0001", 1}, // rounded up, as Kubernetes does for CPU
		{"1e3", 1_000_000},
		{"1E3", 1_000_000},
		{"1e+3", 1_000_000},
		{"5e-1", 500},
		{"2k", 2_000_000},
		{"1Ki", 1_024_000},
		{"+5", 5000},
		{".5", 500},
		{"5.", 5000},
		{" 4 ", 4000},
		{"0", 0},
		{"0m", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := kube.ParseMilli(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseWhole(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"4", 4},
		{"0", 0},
		{"8.0", 8},
		{"1e1", 10},
		{"2000m", 2},
		{"1k", 1000},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := kube.ParseWhole(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	for _, in := range []string{"1.5", "500m", "1e-1"} {
		t.Run("fraction "+in, func(t *testing.T) {
			_, err := kube.ParseWhole(in)
			require.ErrorIs(t, err, kube.ErrQuantity)
			require.Contains(t, err.Error(), "not a whole number")
			require.Contains(t, err.Error(), in)
		})
	}
}

func TestParseMiB(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"4Gi", 4096},
		{"512Mi", 512},
		{"1Mi", 1},
		{"1Ki", 1},   // rounded up
		{"1e9", 954}, // 1e9 bytes is 953.67 MiB
		{"1G", 954},
		{"1048576", 1},
		{"1Ti", 1 << 20},
		{"0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := kube.ParseMiB(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestQuantityErrors(t *testing.T) {
	tests := []struct {
		in     string
		reason string // part of the message besides the quoted input
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"-1", ""},
		{"-500m", ""},
		{"abc", ""},
		{"1.2.3", ""},
		{"1/2", ""},
		{"0x10", ""},     // big.Rat would read 16
		{"0b11", ""},     // and 3
		{"1_000", ""},    // and 1000
		{"1e3k", ""},     // an exponent is itself a suffix
		{"1e999999", ""}, // costly to expand exactly
		{"1e", ""},
		{"e3", ""},
		{"m", ""},
		{"Gi", ""},
		{".", ""},
		{"+", ""},
		{"1 000", ""},
		{"4GB", ""},
		{"Inf", ""},
		{"NaN", ""},
		{"1e99", "too large"},
		{"10E", "too large"},
		{"1234567890123456789012345678901234567890123456789012345678901234567890", "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			for name, parse := range map[string]func(string) (int64, error){
				"ParseMilli": kube.ParseMilli, "ParseWhole": kube.ParseWhole, "ParseMiB": kube.ParseMiB,
			} {
				v, err := parse(tt.in)
				if tt.reason == "too large" && name == "ParseMiB" && tt.in == "10E" {
					// 10E bytes is about 9.5e12 MiB: a valid amount.
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, kube.ErrQuantity, name)
				require.Zero(t, v, name)
				require.Contains(t, err.Error(), tt.reason, name)
			}
		})
	}
}
