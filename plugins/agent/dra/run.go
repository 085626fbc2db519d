package dra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
)

// RunOptions say where the kubelet finds the driver.
type RunOptions struct {
	// Client reaches the API server (publishing the ResourceSlices,
	// reading the claims at start); required.
	Client kubernetes.Interface
	// PluginDir is the kubelet's plugin directory; the driver's socket is
	// in <PluginDir>/<driver name>/ (created when missing). "" means
	// kubeletplugin.KubeletPluginsDir, /var/lib/kubelet/plugins.
	PluginDir string
	// RegistryDir is the kubelet's plugin registration directory; "" means
	// kubeletplugin.KubeletRegistryDir, /var/lib/kubelet/plugins_registry.
	RegistryDir string
	// Extra are more options of kubeletplugin.Start (tests use them).
	Extra []kubeletplugin.Option
}

// ClaimGetter reads a ResourceClaim from the API server.
type ClaimGetter func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)

// Run runs the DRA role until ctx is done: it reconciles the claims held
// in the node state with the API server's ([Driver.Reconcile]), serves the
// driver's registration socket (a stale one removed, see registrarSocket)
// and DRA API for the kubelet (kubeletplugin.Start), publishes the
// ResourceSlices and then checks the devices' nodes every
// Options.HealthInterval, republishing at every change; it logs each
// answer of the kubelet to the registration. It returns nil
// when ctx is done, and an error when the driver cannot start or a fatal
// error of the kubelet plugin helper stops it.
func (d *Driver) Run(ctx context.Context, ro RunOptions) error {
	if ro.Client == nil {
		return errors.New("dra: Run needs a Kubernetes client")
	}
	if ro.PluginDir == "" {
		ro.PluginDir = kubeletplugin.KubeletPluginsDir
	}
	if ro.RegistryDir == "" {
		ro.RegistryDir = kubeletplugin.KubeletRegistryDir
	}
	dataDir := filepath.Join(ro.PluginDir, d.opts.DriverName)
	for _, dir := range []string{dataDir, ro.RegistryDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("dra: %w", err)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.mu.Lock()
	d.fatal = cancel
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.fatal = nil
		d.mu.Unlock()
	}()

	get := func(ctx context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
		return ro.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err := d.Reconcile(ctx, get); err != nil {
		d.log.Error("cannot reconcile the prepared claims with the API server's; they are kept", "error", err)
	}
	d.CheckHealth()

	regSocket, err := registrarSocket(ro.RegistryDir, d.opts.DriverName)
	if err != nil {
		return fmt.Errorf("dra: %w", err)
	}
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(d.opts.DriverName),
		kubeletplugin.NodeName(d.opts.NodeName),
		kubeletplugin.KubeClient(ro.Client),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.RegistrarDirectoryPath(ro.RegistryDir),
		kubeletplugin.RegistrarSocketFilename(regSocket),
		kubeletplugin.HealthService(d.opts.HealthInterval > 0),
	}
	if uid := tokenNodeUID(ctx, ro.Client, d.opts.NodeName); uid != "" {
		opts = append(opts, kubeletplugin.NodeUID(types.UID(uid)))
	}
	opts = append(opts, ro.Extra...)
	helper, err := kubeletplugin.Start(klog.NewContext(ctx, klog.Background()), d, opts...)
	if err != nil {
		return fmt.Errorf("dra: start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	d.SetPublisher(helper)
	defer d.SetPublisher(nil)
	if err := d.Publish(ctx); err != nil {
		return fmt.Errorf("dra: publish the ResourceSlices: %w", err)
	}
	for _, n := range d.cat.Notes() {
		d.log.Info("device attribute left out", "note", n)
	}
	d.log.Info("DRA driver serving; waiting for the kubelet to register it", "driver", d.opts.DriverName, "pool", d.opts.NodeName,
		"devices", len(d.cat.Names()), "pluginDir", dataDir, "registrationSocket", filepath.Join(ro.RegistryDir, regSocket),
		"cdiRoot", d.opts.CDIRoot, "listAttributes", d.opts.ListAttributes)

	var tick <-chan time.Time
	if d.opts.HealthInterval > 0 {
		t := time.NewTicker(d.opts.HealthInterval)
		defer t.Stop()
		tick = t.C
	}
	// The kubelet's answers to the registration (NotifyRegistrationStatus)
	// are logged as they come: the helper keeps only the last one.
	reg := time.NewTicker(registrationPoll)
	defer reg.Stop()
	var lastStatus *registerapi.RegistrationStatus
	for {
		select {
		case <-reg.C:
			st := helper.RegistrationStatus()
			if st == nil || st == lastStatus {
				continue
			}
			lastStatus = st
			if st.PluginRegistered {
				d.log.Info("DRA driver registered by the kubelet", "driver", d.opts.DriverName)
			} else {
				d.log.Error("the kubelet refused to register the DRA driver", "driver", d.opts.DriverName, "error", st.Error)
			}
		case <-ctx.Done():
			if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("dra: %w", err)
			}
			return nil
		case <-tick:
			if d.CheckHealth() {
				if err := d.Publish(ctx); err != nil {
					d.log.Error("cannot republish the ResourceSlices", "error", err)
				}
			}
		}
	}
}

// registrationPoll is how often Run looks at the kubelet's last answer to
// the driver's registration.
const registrationPoll = 250 * time.Millisecond

// unixPathMax is the longest path a Unix socket may have on Linux (108
// bytes with the terminating NUL).
const unixPathMax = 107

// registrarSocket removes the registration sockets of the driver that a
// run which did not stop cleanly (kill -9, a node's crash) left in dir
// ("<driver>-reg.sock", the kubelet plugin helper's default, and
// "<driver>-reg-<id>.sock") and returns a new name to listen on,
// "<driver>-reg-<id>.sock" with a random id of 8 hex digits (fewer, at
// least 4, when the path would be longer than a Unix socket's 107 bytes).
//
// A new name each run: a kubelet still trying an old socket path (it does
// so at start, a blocking dial of 10 s, then again with a backoff of up to
// 2 minutes per path) would, on the same path, reach the new server with
// the old socket's registration, and then unregister and register the
// driver again a second later, failing the prepares in between. On a path
// it has never seen it registers the driver once, at once.
func registrarSocket(dir, driver string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read the kubelet registration directory: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if n != driver+"-reg.sock" && !(strings.HasPrefix(n, driver+"-reg-") && strings.HasSuffix(n, ".sock")) {
			continue
		}
		if e.Type()&fs.ModeSocket == 0 {
			return "", fmt.Errorf("the kubelet registration directory %s has %s, which is not a socket; remove it", dir, n)
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("remove the stale registration socket: %w", err)
		}
	}
	room := min(unixPathMax-len(filepath.Join(dir, driver+"-reg-.sock")), 8)
	if room < 4 {
		return "", fmt.Errorf("the kubelet registration directory %s and the driver name %s leave no room for a socket name (a Unix socket's path has at most %d bytes)",
			dir, driver, unixPathMax)
	}
	return fmt.Sprintf("%s-reg-%s.sock", driver, fmt.Sprintf("%08x", rand.Uint32())[:room]), nil
}

// tokenNodeUID returns the UID of the node the client's token is bound to
// (the extra "authentication.kubernetes.io/node-uid" of a service account
// token bound to a pod on the node, read by a SelfSubjectReview, which
// every user may make) when it is bound to the node of the given name, so
// that the slices' owner needs no read of the Node; "" otherwise (the
// kubelet plugin helper then reads the Node).
func tokenNodeUID(ctx context.Context, client kubernetes.Interface, node string) string {
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	extra := r.Status.UserInfo.Extra
	names, uids := extra["authentication.kubernetes.io/node-name"], extra["authentication.kubernetes.io/node-uid"]
	if len(names) != 1 || names[0] != node || len(uids) != 1 {
		return ""
	}
	return uids[0]
}

// Reconcile brings the claims the node state holds (from the checkpoint,
// after a restart) in line with the API server: a claim that is gone, has
// another UID (deleted and made again), is no longer allocated, or whose
// allocation no longer names this node's devices is released and its CDI
// spec removed; one still allocated keeps its devices, its reserved-for
// pods are updated and its CDI spec is written again (in case it was
// lost). A claim that cannot be read (the API server is unreachable) is
// kept. Then every CDI spec of the driver's kind that no held claim names
// is removed. Errors are joined; the reconciliation goes on past them.
func (d *Driver) Reconcile(ctx context.Context, get ClaimGetter) error {
	var errs []error
	for _, h := range d.node.Claims() {
		c, err := get(ctx, h.Namespace, h.Name)
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, d.forget(h, "the claim no longer exists"))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("claim %s: %w", h.Key(), err))
			continue
		case string(c.UID) != h.UID:
			errs = append(errs, d.forget(h, "the claim was deleted and made again (UID "+string(c.UID)+")"))
			continue
		case c.Status.Allocation == nil:
			errs = append(errs, d.forget(h, "the claim is no longer allocated"))
			continue
		}
		if !d.allocatesHeld(c, h) {
			errs = append(errs, d.forget(h, "the claim's allocation no longer names the devices held for it"))
			continue
		}
		next := h
		next.Pods = nil
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.APIGroup == "" {
				next.Pods = append(next.Pods, kubelet.ClaimConsumer{Name: r.Name, UID: string(r.UID)})
			}
		}
		if err := d.node.HoldClaim(next); err != nil {
			errs = append(errs, fmt.Errorf("claim %s: update its pods: %w", h.Key(), err))
		}
		if err := d.writeSpec(h); err != nil {
			errs = append(errs, fmt.Errorf("claim %s: %w", h.Key(), err))
		}
	}
	uids, err := d.cdi.claimUIDs()
	if err != nil {
		errs = append(errs, fmt.Errorf("list the CDI specs: %w", err))
	}
	for _, uid := range uids {
		if _, ok := d.node.Claim(uid); ok {
			continue
		}
		if err := d.cdi.remove(uid); err != nil {
			errs = append(errs, err)
		} else {
			d.log.Info("removed the CDI spec of a claim that is not prepared", "uid", uid)
		}
	}
	return errors.Join(errs...)
}

// forget releases a held claim and removes its CDI spec.
func (d *Driver) forget(h kubelet.ClaimHold, why string) error {
	d.log.Info("releasing a prepared claim", "claim", h.Key(), "uid", h.UID, "reason", why)
	if err := d.cdi.remove(h.UID); err != nil {
		return fmt.Errorf("claim %s: %w", h.Key(), err)
	}
	if err := d.node.ReleaseClaim(h.UID); err != nil && !errors.Is(err, allocator.ErrUnknownID) {
		return fmt.Errorf("claim %s: %w", h.Key(), err)
	}
	d.changed()
	return nil
}

// allocatesHeld reports whether the claim's allocation names exactly the
// devices held for it in this node's pool.
func (d *Driver) allocatesHeld(c *resourceapi.ResourceClaim, h kubelet.ClaimHold) bool {
	var gpus []int
	var nics []string
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != d.opts.DriverName || r.Pool != d.opts.NodeName {
			continue
		}
		ref, ok := d.cat.Lookup(r.Device)
		if !ok {
			return false
		}
		if ref.Class == allocator.GPUClass {
			gpus = append(gpus, ref.GPU)
		} else {
			nics = append(nics, ref.ID)
		}
	}
	slices.Sort(gpus)
	slices.Sort(nics)
	return slices.Equal(slices.Compact(gpus), h.GPUs) && slices.Equal(slices.Compact(nics), h.Devices["rdma"])
}
