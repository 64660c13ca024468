/* placeholder: the gRPC server lands here */
typedef int rpc_placeholder;
