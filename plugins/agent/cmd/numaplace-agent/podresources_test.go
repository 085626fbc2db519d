package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// withPodResources calls f with a client of the kubelet's pod-resources
// API (the socket in its directory, /var/lib/kubelet/pod-resources/kubelet.sock
// in the node's mount namespace), a context of 10 s for its calls and the
// socket's path, and closes the connection after.
func withPodResources(t *testing.T, e *kubeletEnv, f func(ctx context.Context, client podresources.PodResourcesListerClient, sock string)) {
	t.Helper()
	sock := filepath.Join(e.kubeletDir, "pod-resources", "kubelet.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f(ctx, podresources.NewPodResourcesListerClient(conn), sock)
}

// listPodResources is the kubelet's pod-resources List: every pod it
// lists with its containers' resources.
func listPodResources(t *testing.T, e *kubeletEnv) []*podresources.PodResources {
	t.Helper()
	var out []*podresources.PodResources
	withPodResources(t, e, func(ctx context.Context, client podresources.PodResourcesListerClient, sock string) {
		resp, err := client.List(ctx, &podresources.ListPodResourcesRequest{})
		require.NoError(t, err, "List on the kubelet's pod-resources API at %s", sock)
		out = resp.GetPodResources()
	})
	return out
}
