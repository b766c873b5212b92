// Command kubeadm is the upstream kubeadm, built from the Go module proxy for the kind node image
// the harness builds (kind runs `kubeadm init` and `kubeadm join` inside each node).
package main

import (
	"k8s.io/kubernetes/cmd/kubeadm/app"
	utilerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
)

func main() {
	utilerrors.HandleError(app.Run())
}
