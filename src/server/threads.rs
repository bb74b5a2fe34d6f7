//! Threads: the fingerprint that decides whether a session's thread can be reused, and a run's
//! claim on its thread (one run per thread at a time).

use super::bridge::Bridge;
use crate::config::Run;
use crate::translate::params::dynamic_tools;
use crate::translate::params::thread_config;
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{json, Value};
use std::sync::Arc;

/// What reuses a thread: tools (without descriptions), thread config, model and developer text.
pub fn thread_fingerprint(run: &Run, developer_instructions: &str) -> String {
    let (tools, _) = dynamic_tools(run);
    let mut specs: Vec<String> = serde_json::to_value(&tools)
        .ok()
        .and_then(|value| value.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|mut spec| {
            strip_descriptions(&mut spec);
            spec.to_string()
        })
        .collect();
    specs.sort();
    let fingerprint = json!({
        "tools": specs,
        "config": thread_config(run),
        "model": run.model,
        "developerInstructions": crate::support::hex::sha256(developer_instructions.as_bytes(), 32),
    });
    crate::support::hex::sha256(fingerprint.to_string().as_bytes(), 32)
}

pub(super) fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// One run's hold on a thread; dropping it frees the thread for the next run.
pub(super) struct ThreadClaim {
    pub(super) bridge: Arc<Bridge>,
    pub(super) thread_id: String,
}

impl ThreadClaim {
    pub(super) fn new(
        bridge: &Arc<Bridge>,
        thread_id: &str,
        session_key: Option<&str>,
    ) -> Result<Self, ErrorObjectOwned> {
        bridge.claim_thread(thread_id, session_key)?;
        Ok(Self {
            bridge: Arc::clone(bridge),
            thread_id: thread_id.to_string(),
        })
    }
}

impl Drop for ThreadClaim {
    fn drop(&mut self) {
        self.bridge.release_thread(&self.thread_id);
    }
}
