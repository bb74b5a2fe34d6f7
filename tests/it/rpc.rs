//! The JSON-RPC client the tests talk to `serve` and the endpoint with: jsonrpsee's, from its
//! 0.25 release, a client written apart from the server it tests. Its release is not the
//! server's (0.26) on purpose: Cargo keeps the two apart, so the client's features reach nothing
//! the product compiles and the tests' build is the product's (Cargo.toml's dev-dependencies).

pub use rpc_client_core::client;
pub use rpc_client_core::rpc_params;
pub use rpc_client_core::ClientError;
pub use rpc_http_client as http_client;
pub use rpc_ws_client as ws_client;
