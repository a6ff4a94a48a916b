//! DeleteTopics (20): by name (v0-5) or by name or id (v6+).

use crate::broker::Broker;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::delete_topics::{
    DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
};
use strata_protocol::ErrorCode;

/// Handles DeleteTopics.
pub fn handle(broker: &Broker, version: i16, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, Uuid)> = if version >= 6 {
        request.topics.into_iter().map(|t| (t.name, t.topic_id)).collect()
    } else {
        request.topic_names.into_iter().map(|n| (Some(n), Uuid::ZERO)).collect()
    };
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let snapshot = broker.topics.snapshot();
            let resolved = match (&name, id.is_zero()) {
                (Some(n), _) => snapshot.by_name.get(n).map(|m| (m.name.clone(), m.id)),
                (None, false) => snapshot.by_id.get(&id).map(|n| (n.clone(), id)),
                (None, true) => None,
            };
            let Some((topic, topic_id)) = resolved else {
                let code = if name.is_some() {
                    ErrorCode::UnknownTopicOrPartition
                } else {
                    ErrorCode::UnknownTopicId
                };
                return DeletableTopicResult {
                    name,
                    topic_id: id,
                    error_code: code.code(),
                    error_message: None,
                };
            };
            let error_code = match broker.delete_topic(&topic) {
                Ok(()) => 0,
                Err(code) => code.code(),
            };
            DeletableTopicResult { name: Some(topic), topic_id, error_code, error_message: None }
        })
        .collect();
    DeleteTopicsResponse { responses, ..Default::default() }
}
