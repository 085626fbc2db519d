package numa_test

import (
	"strings"
	"testing"

	"github.com/numaplace/numaplace/numa"
)

// The fuzz targets below run their seed corpus as ordinary tests; run one
// with, for example, go test -fuzz FuzzParseCPUSet ./numa.

var cpulistSeeds = []string{
	"", "\n", "0", "0-3,8-11", "0-3,8-11\n", " 1 , 3 - 5 ", "63-64", "0,127-128,1000",
	"65535", "0-65535", "007", "9,2-4,3",
	// bad
	"a", "3-1", "1,,2", ",", "1,", "-1", "1-", "+1", "1-2-3", "1 2", "0x10", "65536",
	"0-65536", "4000000000", "0-99999999999999999999", "1.5", "\x00", "٣",
}

func FuzzParseCPUSet(f *testing.F) {
	for _, s := range cpulistSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := numa.ParseCPUSet(in)
		if err != nil {
			if !s.IsEmpty() {
				t.Fatalf("ParseCPUSet(%q) failed but returned %v", in, s)
			}
			return
		}
		if s.Max() > numa.MaxCPUID {
			t.Fatalf("ParseCPUSet(%q) accepted CPU %d above MaxCPUID", in, s.Max())
		}
		str := s.String()
		back, err := numa.ParseCPUSet(str)
		if err != nil {
			t.Fatalf("ParseCPUSet(%q) -> %q does not parse: %v", in, str, err)
		}
		if !back.Equal(s) || back.String() != str {
			t.Fatalf("round trip of %q: %q then %q", in, str, back.String())
		}
	})
}

func FuzzParseCPUMask(f *testing.F) {
	for _, s := range []string{
		"00000000,0000ff00", "ff", "ff\n", "0xff", "0XF0", "0", "80000000", "1,00000000",
		"ffffffff,ffffffff", "f,0,0", " 0000ff00 , 00000000 ", "aBcD",
		// bad
		"", " ", "0x", "g", "ff,,ff", ",ff", "ff,", "123456789", "-1", "+1", "0-3", "ff ff",
		"0x0x1", "1_0", strings.Repeat("0,", numa.MaxCPUID/32+1) + "1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := numa.ParseCPUMask(in)
		if err != nil {
			if !s.IsEmpty() {
				t.Fatalf("ParseCPUMask(%q) failed but returned %v", in, s)
			}
			return
		}
		if s.Max() > numa.MaxCPUID {
			t.Fatalf("ParseCPUMask(%q) accepted CPU %d above MaxCPUID", in, s.Max())
		}
		back, err := numa.ParseCPUSet(s.String())
		if err != nil || !back.Equal(s) {
			t.Fatalf("ParseCPUMask(%q) = %q, which parses back as %v, %v", in, s.String(), back, err)
		}
	})
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{
		"", "0", "63", "0-63", "0-2,5", " 0 - 2 , 5 \n", "5,0-2", "1,60-63",
		// bad
		"64", "0-64", "-1", "+1", "3-1", "1,,2", "1,", "a", "1-2-3", "0x1", "99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := numa.ParseMask(in)
		if err != nil {
			if m != 0 {
				t.Fatalf("ParseMask(%q) failed but returned %v", in, m)
			}
			return
		}
		str := m.String()
		back, err := numa.ParseMask(str)
		if err != nil || back != m || back.String() != str {
			t.Fatalf("round trip of %q: %q then %v, %v", in, str, back, err)
		}
	})
}
