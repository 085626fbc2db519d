package topology

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// information is an information file as the NVIDIA driver writes it.
const information = `Model: 		 NVIDIA H100 80GB HBM3
IRQ:   		 279
GPU UUID: 	 GPU-5d9c8a2e-1b7f-4c3a-9e0d-2f6b1a7c3e41
Video BIOS: 	 96.00.74.00.0d
Bus Type: 	 PCIe
DMA Size: 	 52 bits
DMA Mask: 	 0xfffffffffffff
Bus Location: 	 0000:1b:00.0
Device Minor: 	 3
GPU Firmware: 	 535.129.03
GPU Excluded:	 No
`

func TestReadNVIDIAGPUInfo(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/driver/nvidia/gpus/0000:1b:00.0/information": {Data: []byte(information)},
		"proc/driver/nvidia/gpus/0000:2a:00.0/information": {Data: []byte("Model: X\nGPU UUID: ??\n")},
		"proc/driver/nvidia/gpus/0000:3a:00.0/information": {Data: []byte("Device Minor: three\n")},
	}
	info, ok, err := ReadNVIDIAGPUInfo(fsys, "0000:1b:00.0")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, NVIDIAGPUInfo{UUID: "GPU-5d9c8a2e-1b7f-4c3a-9e0d-2f6b1a7c3e41", Minor: 3, Model: "NVIDIA H100 80GB HBM3"}, info)

	// The driver does not know the UUID; the file has no minor.
	info, ok, err = ReadNVIDIAGPUInfo(fsys, "0000:2a:00.0")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, NVIDIAGPUInfo{Minor: -1, Model: "X"}, info)

	// No such GPU, or no bus ID: not an error.
	for _, bus := range []string{"0000:ff:00.0", "", "..", "a/b"} {
		_, ok, err = ReadNVIDIAGPUInfo(fsys, bus)
		require.NoError(t, err, bus)
		require.False(t, ok, bus)
	}

	_, _, err = ReadNVIDIAGPUInfo(fsys, "0000:3a:00.0")
	require.ErrorIs(t, err, ErrDiscovery)
	require.ErrorContains(t, err, `proc/driver/nvidia/gpus/0000:3a:00.0/information: Device Minor "three" is not a device minor number`)
}

func TestDiscoverFSReadsNVIDIAUUIDs(t *testing.T) {
	f := twoNodes()
	f.pci = []fakePCI{
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
		{path: "pci0000:80/0000:80:01.0/0000:81:00.0", vendor: "0x10de", class: "0x030200", node: "1"},
	}
	m := f.fs(t)
	m["proc/driver/nvidia/gpus/0000:03:00.0/information"] = &fstest.MapFile{Data: []byte("GPU UUID: GPU-aaaa\nDevice Minor: 0\n")}
	machine, err := DiscoverFS(m)
	require.NoError(t, err)
	gpus := machine.GPUs()
	require.Len(t, gpus, 2)
	require.Equal(t, "GPU-aaaa", gpus[0].UUID)
	require.Empty(t, gpus[1].UUID, "no information file: no UUID")

	// A malformed file stops the discovery with its path.
	m["proc/driver/nvidia/gpus/0000:81:00.0/information"] = &fstest.MapFile{Data: []byte("Device Minor: -1\n")}
	_, err = DiscoverFS(m)
	require.True(t, errors.Is(err, ErrDiscovery))
	require.ErrorContains(t, err, "0000:81:00.0/information")
}
