"""Generated gRPC and protobuf modules (see fake-devices/proto/README.md). Do not edit."""
