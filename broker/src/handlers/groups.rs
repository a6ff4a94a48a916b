//! The classic group APIs: JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup
//! (14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15), ListGroups (16),
//! DeleteGroups (42) and OffsetDelete (47). Each is forwarded to the group coordinator
//! task ([`crate::group_service`]), which owns the state machine; JoinGroup and
//! SyncGroup answers arrive when the rebalance allows.

use crate::broker::Broker;
use crate::group::RequestMeta;
use crate::group_service::{next_token, GroupRequest};
use std::net::SocketAddr;
use std::sync::Arc;
use strata_protocol::{RequestBody, RequestHeader, ResponseBody};

/// Forwards a group request; `None` if the coordinator task is gone (shutdown).
pub async fn handle(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    peer: SocketAddr,
    body: RequestBody,
) -> Option<ResponseBody> {
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
        RequestBody::TxnOffsetCommit(r) => GroupRequest::TxnCommit(r),
        _ => return None,
    };
    let meta = RequestMeta {
        token: next_token(),
        api_version: header.api_version,
        client_id: header.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", peer.ip()),
    };
    broker.groups().call(meta, request).await
}
