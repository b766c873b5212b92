"""The DRA kubelet plugin (for clusters with real kubelets, such as kind): the Registration and
DRAPlugin v1 gRPC services over unix sockets (:mod:`.server`) and the CDI specs that hand the
allocated devices to containers as environment variables (:mod:`.cdi`). The protocol modules in
:mod:`.pb` are generated from the vendored kubelet protos (``fake-devices/proto/``)."""
