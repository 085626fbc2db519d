// Package cluster is the agent's side of the Kubernetes API: the client
// configuration (a kubeconfig file, or in-cluster), the reporter's writer
// (the Node annotation by a JSON merge patch, the NodeResourceTopology
// object by server-side apply) and the NRI role's event sink (Kubernetes
// events on the pods, sent asynchronously).
package cluster
