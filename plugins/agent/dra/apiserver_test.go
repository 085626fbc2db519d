package dra_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/numaplace/numaplace/internal/controlplane"
	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/topology"
)

// TestDriverOnARealAPIServer starts the DRA role with kubeletplugin.Start
// (no kubelet: its registration socket just waits) against etcd and
// kube-apiserver, with deploy/agent.yaml's RBAC and admission policies and
// a token of the agent's service account bound to node node-a, and reads
// the published ResourceSlices back: every device with its attributes,
// owned by the Node (whose UID came from the token), a taint while a
// device node is missing. The service account may not write another
// node's slices.
func TestDriverOnARealAPIServer(t *testing.T) {
	cp := controlplane.StartControlPlane(t) // skips, saying why, without the binaries
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	controlplane.ApplyFiles(t, cp.Config, controlplane.RepoPath(t, "deploy", "agent.yaml"))
	admin, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	nodes := map[string]*corev1.Node{}
	for _, n := range []string{"node-a", "node-b"} {
		nodes[n], err = admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tok, err := admin.CoreV1().ServiceAccounts("numaplace-system").CreateToken(ctx, "numaplace-agent", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1",
			Name: "node-a", UID: nodes["node-a"].UID}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	agentCfg := rest.CopyConfig(cp.Config)
	agentCfg.BearerToken = tok.Status.Token
	agent, err := kubernetes.NewForConfig(agentCfg)
	require.NoError(t, err)

	d, err := dra.New(e.node, e.gpus, e.nics, dra.Options{NodeName: "node-a", CDIRoot: e.cdiDir, HealthInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, dra.RunOptions{Client: agent, PluginDir: filepath.Join(dir, "plugins"), RegistryDir: filepath.Join(dir, "registry")})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	slices := func() []resourceapi.ResourceSlice {
		l, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"})
		require.NoError(t, err)
		return l.Items
	}
	var got []resourceapi.ResourceSlice
	require.Eventually(t, func() bool {
		got = slices()
		return len(got) == 1 && len(got[0].Spec.Devices) == 6
	}, 60*time.Second, 100*time.Millisecond, "the node's slice with 4 GPUs and 2 NICs")
	s := got[0]
	require.Equal(t, dra.DriverName, s.Spec.Driver)
	require.Equal(t, "node-a", s.Spec.Pool.Name)
	require.Len(t, s.OwnerReferences, 1)
	require.Equal(t, nodes["node-a"].UID, s.OwnerReferences[0].UID, "owned by the Node, its UID from the token")
	byName := map[string]resourceapi.Device{}
	for _, dev := range s.Spec.Devices {
		byName[dev.Name] = dev
	}
	g3 := byName["gpu-3"]
	require.Equal(t, int64(1), *g3.Attributes[dra.AttrNUMANode].IntValue)
	require.Equal(t, "GPU-d", *g3.Attributes[dra.AttrUUID].StringValue)
	require.Equal(t, int64(13), *g3.Attributes[dra.AttrMinor].IntValue)
	require.Equal(t, "sw1", *g3.Attributes[dra.AttrPCIeSwitch].StringValue)
	require.Equal(t, "0000:9c:00.0", *g3.Attributes[dra.AttrPCIBusID].StringValue)
	require.Equal(t, "mlx5_1", *byName["nic-mlx5-1"].Attributes[dra.AttrIBDevice].StringValue)
	require.Empty(t, g3.Taints)

	// A GPU's device node goes: tainted; it comes back: the taint goes.
	require.NoError(t, os.Remove(filepath.Join(e.dev, "nvidia13")))
	require.Eventually(t, func() bool {
		for _, dev := range slices()[0].Spec.Devices {
			if dev.Name == "gpu-3" {
				return len(dev.Taints) == 1 && dev.Taints[0].Effect == resourceapi.DeviceTaintEffectNoSchedule &&
					dev.Taints[0].Key == "gpu.numaplace.io/unhealthy"
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "gpu-3 tainted")
	mknod(t, filepath.Join(e.dev, "nvidia13"), 195, 13)
	require.Eventually(t, func() bool {
		for _, dev := range slices()[0].Spec.Devices {
			if dev.Name == "gpu-3" {
				return len(dev.Taints) == 0
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "gpu-3's taint removed")

	// The agent's rights: claims read; another node's slice refused.
	_, err = agent.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	other := s.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Name: "node-b-gpu.numaplace.io-x"}
	other.Spec.NodeName = new("node-b")
	other.Spec.Pool.Name = "node-b"
	require.Eventually(t, func() bool {
		_, err := agent.ResourceV1().ResourceSlices().Create(ctx, other, metav1.CreateOptions{})
		return err != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err))
	}, 30*time.Second, 200*time.Millisecond, "a slice of another node")
	_, err = agent.ResourceV1().ResourceSlices().Create(ctx, other, metav1.CreateOptions{})
	require.ErrorContains(t, err, "numaplace-agent may write only the ResourceSlices of its own node")
	_, err = agent.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "creating a claim: %v", err)
}

// TestListAttributesOnARealAPIServer publishes numa64's 128 GPUs with the
// list form of numaNode to a kube-apiserver whose DRAListTypeAttributes
// gate is on: the API server takes every slice (64 devices each, its limit
// for devices with list attributes) and the lists come back as published.
// With the gate off (the default), the API server refuses the slices:
// the error reaches the error handler (the driver's HandleError logs it).
func TestListAttributesOnARealAPIServer(t *testing.T) {
	m, err := topology.Preset("numa64")
	require.NoError(t, err)
	res, err := dra.BuildResources(dra.Inventory{Machine: m, Pool: "big", ListAttributes: true}, map[string][]string{"gpu": {"100"}})
	require.NoError(t, err)
	for _, gate := range []bool{true, false} {
		t.Run("gate="+strconv.FormatBool(gate), func(t *testing.T) {
			var cp *controlplane.ControlPlane
			if gate {
				cp = controlplane.StartControlPlane(t, "--feature-gates=DRAListTypeAttributes=true")
			} else {
				cp = controlplane.StartControlPlane(t)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			admin, err := kubernetes.NewForConfig(cp.Config)
			require.NoError(t, err)
			node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "big"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			var mu sync.Mutex
			var errs []error
			ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{DriverName: dra.DriverName, KubeClient: admin,
				Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: "big", UID: node.UID},
				Resources: res.DeepCopy(), ErrorHandler: func(_ context.Context, err error, _ string) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}})
			require.NoError(t, err)
			defer ctrl.Stop()
			failed := func() []error {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(errs)
			}
			list := func() []resourceapi.ResourceSlice {
				l, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=big"})
				require.NoError(t, err)
				return l.Items
			}
			if !gate {
				require.Eventually(t, func() bool { return len(failed()) > 0 }, 60*time.Second, 100*time.Millisecond)
				msg := failed()[0].Error()
				require.Contains(t, msg, "attributes[resource.kubernetes.io/numaNode]: Invalid value")
				t.Logf("without the gate: %.200s...", msg)
				require.Empty(t, list(), "no slice stored")
				return
			}
			var got []resourceapi.ResourceSlice
			require.Eventually(t, func() bool {
				got = list()
				return len(got) == 2
			}, 60*time.Second, 100*time.Millisecond, "two slices; errors: %v", failed())
			byName := map[string]resourceapi.Device{}
			for _, s := range got {
				require.Len(t, s.Spec.Devices, 64)
				for _, d := range s.Spec.Devices {
					byName[d.Name] = d
				}
			}
			require.Equal(t, []int64{5, 0, 1, 2, 3, 4, 6, 7}, byName["gpu-10"].Attributes[dra.AttrNUMANode].IntValues)
			require.Len(t, byName["gpu-100"].Taints, 1)
			require.Empty(t, failed())
		})
	}
}
