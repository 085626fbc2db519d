// Command numaplace-inspect prints a node's NUMA placement picture as the
// NUMAPlace scheduler plugin accounts it, read from the cluster through a
// kubeconfig from the same sources as the plugin: the node's machine (from
// the newer of its topology annotation and its NodeResourceTopology object,
// as the plugin chooses; topology's picture) with every bound
// pod's CPUs and GPUs marked, the free CPUs, GPUs and memory per NUMA node,
// the node's NUMAPlaceMisfit condition, the pods whose accounting is not
// exactly their decision, and, for a pod given with --pod, why the node
// takes it or not, in the plugin's words.
//
//	numaplace-inspect [--kubeconfig FILE] [--context NAME] [--pod NAMESPACE/NAME] NODE
//
// The kubeconfig is --kubeconfig, else $KUBECONFIG, else ~/.kube/config.
// It only reads (nodes, pods, noderesourcetopologies; a cluster without the
// NodeResourceTopology CRD has annotations only); the exit status is 0 when the picture was
// printed, 1 when the node or its topology cannot be read, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, newClient))
}

// clients are what the command reads with.
type clients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface // for NodeResourceTopology objects
}

// newClient builds the clients from the kubeconfig (the usual loading
// rules when the path is empty) and the context.
func newClient(kubeconfig, kubecontext string) (clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubecontext}).ClientConfig()
	if err != nil {
		return clients{}, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	return clients{kube: k, dynamic: d}, nil
}

// run is the command: it parses args, reads the node and its pods and
// writes the picture to stdout (errors to stderr), returning the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer,
	client func(kubeconfig, kubecontext string) (clients, error)) int {
	fs := flag.NewFlagSet("numaplace-inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	kubecontext := fs.String("context", "", "the kubeconfig context (default: the current one)")
	podFlag := fs.String("pod", "", "a pod, NAMESPACE/NAME (or NAME in default), to say whether the node takes it and why not")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: numaplace-inspect [--kubeconfig FILE] [--context NAME] [--pod NAMESPACE/NAME] NODE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "numaplace-inspect: want one node name, got %d arguments\n", fs.NArg())
		fs.Usage()
		return 2
	}
	ns, podName, err := splitPod(*podFlag)
	if err != nil {
		fmt.Fprintf(stderr, "numaplace-inspect: --pod: %v\n", err)
		return 2
	}
	c, err := client(*kubeconfig, *kubecontext)
	if err != nil {
		fmt.Fprintf(stderr, "numaplace-inspect: %v\n", err)
		return 1
	}
	if err := inspect(ctx, c, fs.Arg(0), ns, podName, stdout); err != nil {
		fmt.Fprintf(stderr, "numaplace-inspect: %v\n", err)
		return 1
	}
	return 0
}

func splitPod(s string) (ns, name string, err error) {
	if s == "" {
		return "", "", nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = "default", s
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q is not NAMESPACE/NAME", s)
	}
	return ns, name, nil
}

// inspect writes the node's picture; podName, if not "", is a pod to judge.
func inspect(ctx context.Context, cs clients, node, ns, podName string, w io.Writer) error {
	c := cs.kube
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", node, err)
	}
	printCondition(w, n)
	nrt, err := readNRT(ctx, cs.dynamic, node)
	if err != nil {
		return err
	}
	m, key, err := numaplace.MachineOf(n, nrt)
	if err != nil {
		if errors.Is(err, numaplace.ErrNoTopology) {
			return fmt.Errorf("%w: numaplace places no NUMA-aware pod there", err)
		}
		return fmt.Errorf("%w: the node takes no NUMA-aware pod until it is fixed", err)
	}
	list, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	cfg, err := numaplace.Args{}.Config()
	if err != nil {
		return err
	}
	cache, err := scheduler.New(cfg)
	if err != nil {
		return err
	}
	if err := cache.AddNode(scheduler.Node{Name: node, Labels: n.Labels, Machine: m}); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	var pods []*v1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	bound := make([]*kube.Pod, len(pods))
	for i, p := range pods {
		bound[i] = numaplace.PodFromV1(p)
	}
	errs, err := cache.SyncPods(node, bound, nil)
	if err != nil {
		return err
	}
	st, _ := cache.Node(node)
	fmt.Fprintf(w, "node %s: machine from %s, %s\n", node, key, optIn(st))
	marks := marksOf(m, cache, bound)
	if err := m.Picture(w, marks); err != nil {
		return err
	}
	free, _ := cache.Free(node)
	fmt.Fprintln(w, "free per NUMA node (no allocation holds them):")
	for _, f := range free {
		fmt.Fprintf(w, "  NUMA node %d: %d CPUs, %d GPUs, %d MiB\n", f.ID, f.CPUs, f.GPUs, f.MemoryMiB)
	}
	fmt.Fprintf(w, "shared pool: %d CPUs, %s requested by the pods without a NUMA spec\n",
		st.SharedCPUs.Size(), milli(st.SharedRequestMilli))
	if len(st.Misfits) > 0 || len(st.Overcommit) > 0 || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		fmt.Fprintln(w, "not accounted exactly:")
		for _, mf := range st.Misfits {
			fmt.Fprintf(w, "  %s (%s): %s\n", mf.Pod, mf.Kind, mf.Reason)
		}
		for i, e := range errs {
			if e != nil {
				fmt.Fprintf(w, "  %s (%s): %v\n", bound[i].Key(), numaplace.MisfitUnaccounted, e)
			}
		}
		for _, o := range st.Overcommit {
			fmt.Fprintf(w, "  %s\n", o)
		}
	}
	if podName == "" {
		return nil
	}
	return judge(ctx, c, cache, node, ns, podName, w)
}

// readNRT returns the node's NodeResourceTopology object, or nil when it has
// none or the API server does not serve them (no CRD).
func readNRT(ctx context.Context, d dynamic.Interface, node string) (*unstructured.Unstructured, error) {
	if d == nil {
		return nil, nil
	}
	u, err := d.Resource(numaplace.NRTResource).Get(ctx, node, metav1.GetOptions{})
	switch {
	case err == nil:
		return u, nil
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, nil
	}
	return nil, fmt.Errorf("reading the NodeResourceTopology object %s: %w", node, err)
}

// judge says whether the node takes the pod now, and if not why, as the
// plugin's Filter would.
func judge(ctx context.Context, c kubernetes.Interface, cache *scheduler.Cache, node, ns, name string, w io.Writer) error {
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	key := ns + "/" + name
	if p.Spec.NodeName != "" {
		fmt.Fprintf(w, "pod %s is bound to node %s\n", key, p.Spec.NodeName)
		return nil
	}
	kp := numaplace.PodFromV1(p)
	pp, err := cache.Prepare(kp)
	if err != nil {
		fmt.Fprintf(w, "pod %s: %s%v\n", key, numaplace.Prefix, err)
		return nil
	}
	var fe *scheduler.FilterError
	switch err := pp.Filter(node); {
	case err == nil:
		fmt.Fprintf(w, "pod %s: node %s takes it now\n", key, node)
	case errors.As(err, &fe):
		when := "now (releasing pods could change it)"
		if fe.Never {
			when = "whatever is released (the machine cannot hold it)"
		}
		fmt.Fprintf(w, "pod %s: node %s refuses it %s: %s%s\n  %s\n", key, node, when, numaplace.Prefix,
			strings.Join(fe.Reasons, "; "+numaplace.Prefix), fe.Detail)
	default:
		fmt.Fprintf(w, "pod %s: %v\n", key, err)
	}
	return nil
}

func printCondition(w io.Writer, n *v1.Node) {
	for _, c := range n.Status.Conditions {
		if c.Type == numaplace.ConditionMisfit {
			fmt.Fprintf(w, "condition %s=%s (%s): %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}

func optIn(st scheduler.NodeStatus) string {
	if st.OptedIn {
		return "takes NUMA-aware pods"
	}
	return "not opted in (takes no NUMA-aware pods)"
}

func milli(m int64) string {
	if m%1000 == 0 {
		return fmt.Sprintf("%d CPUs", m/1000)
	}
	return fmt.Sprintf("%.3g CPUs", float64(m)/1000)
}

// letters mark the pods' allocations, one each; further ones share '#'.
const letters = "abcdefghijklmnopqrstuvwyzABCDEFGHIJKLMNOPQRSTUVWYZ0123456789"

// marksOf marks each pod's allocation with a letter ('x', the unhealthy
// mark, is left out) and explains the letters.
func marksOf(m *topology.Machine, cache *scheduler.Cache, pods []*kube.Pod) *topology.Marks {
	mk := &topology.Marks{CPUs: map[int]rune{}, GPUs: map[int]rune{}}
	i := 0
	for _, p := range pods {
		st, ok := cache.Pod(p.Key())
		if !ok || st.Allocation == nil {
			continue
		}
		r := '#'
		if i < len(letters) {
			r = rune(letters[i])
		}
		i++
		a := st.Allocation
		for cpu := range a.CPUs.All() {
			mk.CPUs[cpu] = r
		}
		for _, g := range a.GPUs {
			mk.GPUs[g] = r
		}
		mk.Legend = append(mk.Legend, fmt.Sprintf("%c = %s: %s", r, p.Key(), describe(m, a)))
	}
	return mk
}

func describe(m *topology.Machine, a *allocator.Allocation) string {
	parts := []string{a.Policy.String()}
	if n := a.CPUs.Size(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", n))
	}
	if n := len(a.GPUs); n > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", n))
	}
	if mib := a.MemoryMiB(); mib > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB", mib))
	}
	ids := make([]string, 0, a.DenseSpan.Count())
	for _, id := range m.IDsOf(a.DenseSpan) {
		ids = append(ids, fmt.Sprint(id))
	}
	if len(ids) > 0 {
		parts = append(parts, "NUMA nodes "+strings.Join(ids, ","))
	}
	return strings.Join(parts, ", ")
}
