package numaplace

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/numaplace/numaplace/adapters/kube"
)

// TestEventsClaimsHoldTheirGPUs: an allocated claim of numaplace GPUs that
// no pod with a decision accounts holds its GPUs in the cache (through its
// stand-in); reserved for a bound pod with a decision it is that pod's;
// deallocated, it holds nothing; a restarted plugin counts the same.
func TestEventsClaimsHoldTheirGPUs(t *testing.T) {
	w := newTestEvents(t)
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{claimNodeIndex: indexClaimByNode})
	w.claims = claims
	w.nodeChanged(testNode(t, "n1", "dgx-h100", true))
	rc := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "uid-c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpus", Driver: DRADriver, Pool: "n1", Device: "gpu-5"},
				{Request: "gpus", Driver: DRADriver, Pool: "n1", Device: "gpu-4"},
				{Request: "nic", Driver: DRADriver, Pool: "n1", Device: "nic-mlx5-0"},
				{Request: "other", Driver: "other.example.com", Pool: "n1", Device: "gpu-1"},
			}}}}}
	w.store(claims, rc)
	w.syncNode("n1")
	require.Equal(t, []int{4, 5}, heldGPUs(t, w.pl.cache, "default/"+ClaimHolderPrefix+"c"))
	require.Error(t, w.pl.cache.Filter(PodFromV1(numaPod("r8", "Restricted", 8, 8)), "n1"), "GPUs 4 and 5 are held")

	restarted := newWorld(t, w.nodeStore, w.podStore)
	restarted.claims = claims
	restarted.syncNode("n1")
	require.Equal(t, []int{4, 5}, heldGPUs(t, restarted.pl.cache, "default/"+ClaimHolderPrefix+"c"))

	p := boundPod("owner", "n1", 2, `{"policy":"None","cpuset":"","gpus":[{"id":4},{"id":5}]}`)
	p.UID = types.UID("uid-owner")
	w.podChanged(p)
	q := rc.DeepCopy()
	q.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "owner", UID: "uid-owner"}}
	w.store(claims, q)
	w.syncNode("n1")
	_, ok := w.pl.cache.Pod("default/" + ClaimHolderPrefix + "c")
	require.False(t, ok, "the claim is its pod's")
	require.Equal(t, []int{4, 5}, heldGPUs(t, w.pl.cache, "default/owner"))

	w.podDeleted(p)
	require.Equal(t, []int{4, 5}, heldGPUs(t, w.pl.cache, "default/"+ClaimHolderPrefix+"c"), "the pod is gone, its claim is still allocated")
	q = q.DeepCopy()
	q.Status = resourceapi.ResourceClaimStatus{}
	w.store(claims, q)
	w.syncNode("n1")
	_, ok = w.pl.cache.Pod("default/" + ClaimHolderPrefix + "c")
	require.False(t, ok, "a deallocated claim holds nothing")
	require.NoError(t, w.pl.cache.Filter(PodFromV1(numaPod("r8", "Restricted", 8, 8)), "n1"))
}

// TestEventsBoundDRAPodIsNoMisfit: a bound pod whose GPUs come from its
// claims (no aliyun.com/gpu in its containers) and whose decision names
// them is accounted by its decision, without a misfit.
func TestEventsBoundDRAPodIsNoMisfit(t *testing.T) {
	w := newTestEvents(t)
	w.nodeChanged(testNode(t, "n1", "dgx-h100", true))
	p := boundPod("dra", "n1", 0, `{"policy":"SingleNUMANode","cpuset":"112-113","numaNodes":[1],"gpus":[{"id":4},{"id":5}],"memoryMiB":{"1":0}}`)
	delete(p.Spec.Containers[0].Resources.Requests, "aliyun.com/gpu")
	delete(p.Spec.Containers[0].Resources.Limits, "aliyun.com/gpu")
	p.Annotations[kube.AnnotationCPUSetScheduler] = "required"
	p.Annotations[kube.AnnotationSpecAlibaba] = `{"numaTopologyPolicy":"SingleNUMANode"}`
	w.podChanged(p)
	require.Equal(t, []int{4, 5}, heldGPUs(t, w.pl.cache, "default/dra"))
	st, ok := w.pl.cache.Node("n1")
	require.True(t, ok)
	require.Empty(t, st.Misfits)
}
