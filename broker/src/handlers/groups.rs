//! The classic group APIs: JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup
//! (14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15), ListGroups (16),
//! DeleteGroups (42) and OffsetDelete (47), and TxnOffsetCommit (28). Each is forwarded
//! to the group coordinator task ([`crate::coordinator::group::service`]), which owns the state
//! machine; JoinGroup and SyncGroup answers arrive when the rebalance allows. A
//! TxnOffsetCommit is first verified with the transaction coordinator (KIP-890 part 1).

use crate::coordinator::group::service::GroupService;
use crate::coordinator::group::service::{next_token, GroupRequest};
use crate::coordinator::group::RequestMeta;
use crate::coordinator::txn::service::TxnService;
use crate::coordinator::txn::verification_error_for_client;
use crate::node::Node;
use std::net::SocketAddr;
use strata_protocol::messages::offset_commit::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use strata_protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
};
use strata_protocol::{ErrorCode, RequestBody, RequestHeader, ResponseBody};

/// Forwards a group request; `None` if the coordinator task is gone (shutdown).
pub async fn handle(
    node: &Node,
    groups: &GroupService,
    transactions: &TxnService,
    header: &RequestHeader,
    peer: SocketAddr,
    body: RequestBody,
) -> Option<ResponseBody> {
    // Clients that skip FindCoordinator still get a coordinator: create the topic on the
    // first group request, as FindCoordinator would (the answer may then still be
    // NOT_COORDINATOR if another broker leads the group's partition).
    if let Err(code) = groups.ensure_topic().await {
        tracing::debug!(error = code.name(), "__consumer_offsets not available yet");
    }
    let (body, unknown) = split_unknown_topics(node, body);
    if let Some(answer) = unknown.answer_alone(&body) {
        return Some(answer);
    }
    let request = match body {
        RequestBody::JoinGroup(r) => GroupRequest::Join(r),
        RequestBody::SyncGroup(r) => GroupRequest::Sync(r),
        RequestBody::Heartbeat(r) => GroupRequest::Heartbeat(r),
        RequestBody::LeaveGroup(r) => GroupRequest::Leave(r),
        RequestBody::OffsetCommit(r) => GroupRequest::Commit(r),
        RequestBody::OffsetFetch(r) => GroupRequest::Fetch(r),
        RequestBody::DescribeGroups(r) => GroupRequest::Describe(r),
        RequestBody::ListGroups(r) => GroupRequest::List(r),
        RequestBody::DeleteGroups(r) => GroupRequest::DeleteGroups(r),
        RequestBody::OffsetDelete(r) => GroupRequest::OffsetDelete(r),
        RequestBody::TxnOffsetCommit(r) => {
            match verify_txn_offset_commit(transactions, header.api_version, &r).await {
                Some(refused) => return Some(unknown.merge_into(refused.into())),
                None => GroupRequest::TxnCommit(r),
            }
        }
        _ => return None,
    };
    let meta = RequestMeta {
        token: next_token(),
        api_version: header.api_version,
        client_id: header.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", peer.ip()),
    };
    // A join or sync waits for the other members (Kafka's delayed join is remote time).
    let waits_for_members = matches!(request, GroupRequest::Join(_) | GroupRequest::Sync(_));
    let call = groups.call(meta, request);
    let response = if waits_for_members { crate::metrics::remote_wait(call).await } else { call.await }?;
    Some(unknown.merge_into(response))
}

/// The topics of an OffsetCommit or TxnOffsetCommit that do not exist, answered
/// UNKNOWN_TOPIC_OR_PARTITION per partition as Kafka's request handler does before the
/// coordinator sees the request (which then gets only the topics that exist).
enum UnknownTopics {
    None,
    Commit(Vec<OffsetCommitResponseTopic>),
    TxnCommit(Vec<TxnOffsetCommitResponseTopic>),
}

fn split_unknown_topics(node: &Node, body: RequestBody) -> (RequestBody, UnknownTopics) {
    let image = node.metadata.current();
    let unknown = ErrorCode::UnknownTopicOrPartition.code();
    match body {
        RequestBody::OffsetCommit(mut r) if r.topics.iter().any(|t| image.topic(&t.name).is_none()) => {
            let (known, missing): (Vec<_>, Vec<_>) =
                r.topics.into_iter().partition(|t| image.topic(&t.name).is_some());
            r.topics = known;
            let missing = missing
                .into_iter()
                .map(|t| OffsetCommitResponseTopic {
                    name: t.name,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| OffsetCommitResponsePartition {
                            partition_index: p.partition_index,
                            error_code: unknown,
                        })
                        .collect(),
                })
                .collect();
            (RequestBody::OffsetCommit(r), UnknownTopics::Commit(missing))
        }
        RequestBody::TxnOffsetCommit(mut r) if r.topics.iter().any(|t| image.topic(&t.name).is_none()) => {
            let (known, missing): (Vec<_>, Vec<_>) =
                r.topics.into_iter().partition(|t| image.topic(&t.name).is_some());
            r.topics = known;
            let missing = missing
                .into_iter()
                .map(|t| TxnOffsetCommitResponseTopic {
                    name: t.name,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| TxnOffsetCommitResponsePartition {
                            partition_index: p.partition_index,
                            error_code: unknown,
                        })
                        .collect(),
                })
                .collect();
            (RequestBody::TxnOffsetCommit(r), UnknownTopics::TxnCommit(missing))
        }
        body => (body, UnknownTopics::None),
    }
}

impl UnknownTopics {
    /// The whole answer when no topic of the request exists (the coordinator is not asked).
    fn answer_alone(&self, body: &RequestBody) -> Option<ResponseBody> {
        match (self, body) {
            (UnknownTopics::Commit(t), RequestBody::OffsetCommit(r)) if r.topics.is_empty() => {
                Some(OffsetCommitResponse { topics: t.clone(), ..Default::default() }.into())
            }
            (UnknownTopics::TxnCommit(t), RequestBody::TxnOffsetCommit(r)) if r.topics.is_empty() => {
                Some(TxnOffsetCommitResponse { topics: t.clone(), ..Default::default() }.into())
            }
            _ => None,
        }
    }

    /// The coordinator's answer with the unknown topics' errors added.
    fn merge_into(self, response: ResponseBody) -> ResponseBody {
        match (self, response) {
            (UnknownTopics::Commit(t), ResponseBody::OffsetCommit(mut r)) => {
                r.topics.extend(t);
                r.into()
            }
            (UnknownTopics::TxnCommit(t), ResponseBody::TxnOffsetCommit(mut r)) => {
                r.topics.extend(t);
                r.into()
            }
            (_, response) => response,
        }
    }
}

/// KIP-890 part 1, as Kafka's group coordinator does it: a transactional offset commit
/// is accepted only if the producer's ongoing transaction includes the group's
/// `__consumer_offsets` partition (AddOffsetsToTxn), so a late TxnOffsetCommit of an
/// ended transaction cannot leave offsets pending in no transaction (or in the next
/// one). Returns the refusal, every partition carrying the error; `None` to go on. An
/// empty group id is left to the group coordinator (INVALID_GROUP_ID comes first).
async fn verify_txn_offset_commit(
    transactions: &TxnService,
    version: i16,
    request: &TxnOffsetCommitRequest,
) -> Option<TxnOffsetCommitResponse> {
    if request.group_id.is_empty() {
        return None;
    }
    let code = transactions
        .verify_offsets(
            request.transactional_id.clone(),
            request.producer_id,
            request.producer_epoch,
            &request.group_id,
        )
        .await;
    if code == ErrorCode::None {
        return None;
    }
    // Clients know TRANSACTION_ABORTABLE from TxnOffsetCommit v4 (KIP-890).
    let code = verification_error_for_client(code, version >= 4);
    tracing::debug!(
        group = %request.group_id,
        transactional_id = %request.transactional_id,
        error = code.name(),
        "transactional offset commit refused by verification"
    );
    Some(crate::coordinator::group::txn_commit_response(request, code))
}
