package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
)

// EnvVisibleDevices is the environment variable through which the NVIDIA
// container runtime exposes GPUs to a container.
const EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

// VisibleDevices returns the value of NVIDIA_VISIBLE_DEVICES for the
// admission: its GPUs, comma-separated, each by UUID when the machine knows
// it and by index otherwise; "void" when it has none, which makes the NVIDIA
// runtime expose no GPU even to an image that sets "all" (as CUDA base
// images do).
func (a *Admission) VisibleDevices() string {
	if len(a.GPUs) == 0 {
		return "void"
	}
	parts := make([]string, len(a.GPUs))
	for i, g := range a.GPUs {
		if g.UUID != "" {
			parts[i] = g.UUID
		} else {
			parts[i] = strconv.Itoa(g.ID)
		}
	}
	return strings.Join(parts, ",")
}

// Env returns the environment entries the admission adds to its containers,
// in "NAME=value" form: NVIDIA_VISIBLE_DEVICES.
func (a *Admission) Env() []string {
	return []string{EnvVisibleDevices + "=" + a.VisibleDevices()}
}

// Apply writes the admission into the cgroup v2 directory cgroup under
// root (such as root "/sys/fs/cgroup" and cgroup
// "kubepods.slice/.../cri-containerd-<id>.scope"): cpuset.cpus gets the
// CPUs and cpuset.mems the NUMA nodes ([Admission.Mems]). It returns the
// environment entries for the container ([Admission.Env]).
//
// Each file is written as cgroupfs expects: opened with O_WRONLY|O_TRUNC
// (never created: a cgroup directory without cpuset.cpus has no cpuset
// controller, which the error says) and written in a single write. cgroup
// must be a relative path that stays under root. An admission without CPUs
// is refused, since an empty cpuset.cpus means "inherit the parent's" in
// cgroup v2. Errors name the file.
func Apply(root, cgroup string, a *Admission) ([]string, error) {
	if a == nil {
		return nil, errors.New("kubelet.Apply: nil admission")
	}
	if cgroup != "" && !filepath.IsLocal(cgroup) {
		return nil, fmt.Errorf("kubelet.Apply: cgroup path %s must be relative and stay under the root %s", quote.Short(cgroup), quote.Short(root))
	}
	if a.CPUs.IsEmpty() {
		return nil, fmt.Errorf("kubelet.Apply: pod %s: the admission has no CPUs (an empty cpuset.cpus would inherit the parent's)", a.Pod)
	}
	mems := a.Mems()
	if mems == "" {
		return nil, fmt.Errorf("kubelet.Apply: pod %s: the admission has no NUMA nodes for cpuset.mems", a.Pod)
	}
	dir := filepath.Join(root, cgroup)
	if err := writeCgroupFile(dir, "cpuset.cpus", a.CPUs.String()); err != nil {
		return nil, err
	}
	if err := writeCgroupFile(dir, "cpuset.mems", mems); err != nil {
		return nil, err
	}
	return a.Env(), nil
}

// writeCgroupFile writes value to the existing file dir/name with one
// write, as cgroupfs needs.
func writeCgroupFile(dir, name, value string) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(dir); derr != nil {
			return fmt.Errorf("write %s: the cgroup directory does not exist: %w", path, derr)
		}
		return fmt.Errorf("write %s: the file does not exist: is the cpuset controller enabled in the parent's cgroup.subtree_control? %w", path, err)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	data := []byte(value + "\n")
	nw, err := f.Write(data)
	if err == nil && nw != len(data) {
		err = fmt.Errorf("short write: %d of %d bytes", nw, len(data))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s to %s: %w", quote.Short(value), path, err)
	}
	return nil
}
