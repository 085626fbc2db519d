// Package cluster is the agent's side of the Kubernetes API: the client
// configuration (a kubeconfig file, or in-cluster), the reporter's writer
// (the Node annotation by a JSON merge patch, the NodeResourceTopology
// object by server-side apply), the NRI role's event sink (Kubernetes
// events on the pods, sent asynchronously) and the writer of the decisions
// of pods resized in place ([Decisions]: their numaplace.io/allocation
// annotation, patched in the background).
package cluster
