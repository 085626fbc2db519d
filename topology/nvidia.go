package topology

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
)

// NVIDIAGPUInfo is what the NVIDIA driver says of one GPU in
// proc/driver/nvidia/gpus/<bus id>/information.
type NVIDIAGPUInfo struct {
	// UUID is the "GPU UUID" line, such as "GPU-5d9c...", or "" when the
	// driver does not know it (it prints "??" then).
	UUID string
	// Minor is the "Device Minor" line: the N of the GPU's device node
	// /dev/nvidiaN; -1 when the file has no such line.
	Minor int
	// Model is the "Model" line, such as "NVIDIA H100 80GB HBM3".
	Model string
}

// ReadNVIDIAGPUInfo reads proc/driver/nvidia/gpus/<busID>/information in
// fsys (rooted like [DiscoverFS]'s, "/" for this machine), the file in which
// the NVIDIA kernel driver describes a GPU: lines "Name: value". It reports
// false when the file does not exist (no NVIDIA driver, or not an NVIDIA
// GPU). Lines other than Model, GPU UUID and Device Minor are ignored: the
// driver adds lines across versions. A Device Minor that is not a number
// is an error naming the file, wrapping [ErrDiscovery]; so is a file that
// cannot be read.
func ReadNVIDIAGPUInfo(fsys fs.FS, busID string) (NVIDIAGPUInfo, bool, error) {
	info := NVIDIAGPUInfo{Minor: -1}
	if busID == "" || strings.ContainsAny(busID, "/\\") || busID == "." || busID == ".." {
		return info, false, nil
	}
	p := procNvidia + "/" + busID + "/information"
	data, err := fs.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return info, false, nil
	}
	if err != nil {
		return info, false, discoveryError(p, err)
	}
	for line := range strings.Lines(string(data)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(name) {
		case "Model":
			info.Model = value
		case "GPU UUID":
			if strings.HasPrefix(value, "GPU-") || strings.HasPrefix(value, "MIG-") {
				info.UUID = value
			}
		case "Device Minor":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return info, false, malformed(p, "Device Minor %s is not a device minor number", quote.Short(value))
			}
			info.Minor = n
		}
	}
	return info, true, nil
}

// readNVIDIAUUIDs gives each GPU without a UUID the one the NVIDIA driver
// reports for its bus ID, where it does.
func (d *discovery) readNVIDIAUUIDs() error {
	for i := range d.gpus {
		g := &d.gpus[i]
		if g.UUID != "" || g.BusID == "" {
			continue
		}
		info, ok, err := ReadNVIDIAGPUInfo(d.fsys, g.BusID)
		if err != nil {
			return err
		}
		if ok {
			g.UUID = info.UUID
		}
	}
	return nil
}
