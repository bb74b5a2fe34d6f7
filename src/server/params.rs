//! A bridge method's params as their type: a JSON object (or one positional value) read into
//! the method's params type, a bad one refused naming the field. The method table
//! (`methods`) and a run's start (`run_start`) both read params this way.

use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde_json::Value;

use super::api;
use super::errors::codes;
use super::errors::rpc_error;

pub(super) fn object_param(params: &Params<'_>) -> Result<Value, ErrorObjectOwned> {
    let value: Value = params
        .parse()
        .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
    match value {
        Value::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
        other => Ok(other),
    }
}

/// A method's params as its type (by name, or one positional value); a bad one is refused
/// naming the field.
pub(super) fn typed<T: serde::de::DeserializeOwned>(
    params: &Params<'_>,
) -> Result<T, ErrorObjectOwned> {
    from_value(object_param(params)?)
}

/// A run-document method's request from its (bounded) text: `{"run": document, ...options}`,
/// or the document itself (it has a `workspace`) as the whole params. Runs on the blocking pool.
pub(super) fn run_request<R: api::CarriesRun>(text: &str) -> Result<R, ErrorObjectOwned> {
    let value = object_param(&Params::new(Some(text)))?;
    if value.get("run").is_some() && value.get("workspace").is_none() {
        from_value(value)
    } else {
        Ok(R::with_document(value))
    }
}

/// `value` as `T`; a bad one is refused naming the field.
fn from_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorObjectOwned> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." {
            String::new()
        } else {
            format!("field `{path}`: ")
        };
        rpc_error(
            codes::INVALID_PARAMS,
            format!(
                "{field}{}",
                crate::support::suggest::serde_message(&error.into_inner().to_string())
            ),
        )
    })
}
