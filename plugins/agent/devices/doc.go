// Package devices finds the device nodes of a machine's NVIDIA GPUs: each
// GPU's /dev/nvidiaN (N its device minor as the driver reports it in
// proc/driver/nvidia/gpus/<bus id>/information, else the GPU's index) and
// the driver's control nodes (/dev/nvidiactl, /dev/nvidia-uvm,
// /dev/nvidia-uvm-tools, /dev/nvidia-modeset) where they exist. The device
// plugin hands them to the kubelet in its Allocate answers, the NRI role
// puts the decision's into each container, and a GPU whose node is
// missing counts as unhealthy. [NICs] does the same for the RDMA NICs:
// each NIC's /dev/infiniband/uverbsN (from its PCI device's
// infiniband_verbs directory in sysfs) and /dev/infiniband/rdma_cm. No cgo
// and no NVML: only files are read.
package devices
