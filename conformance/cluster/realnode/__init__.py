"""Real nodes: a kubelet and containerd beside the kwok nodes; this package holds the parts."""
