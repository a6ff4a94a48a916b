//! DescribeTransactions and ListTransactions (KIP-664), answered from memory.

use std::collections::BTreeMap;
use strata_protocol::messages::describe_transactions::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, TopicData, TransactionState as DescribedState,
};
use strata_protocol::messages::list_transactions::{
    ListTransactionsRequest, ListTransactionsResponse, TransactionState as ListedState,
};
use strata_protocol::ErrorCode;

use super::coordinator::{PartitionState, TransactionCoordinator};
use super::state::TxnState;

impl TransactionCoordinator {
    /// DescribeTransactions: one entry per requested id, in request order;
    /// TRANSACTIONAL_ID_NOT_FOUND for ids this coordinator does not know, NOT_COORDINATOR
    /// / COORDINATOR_LOAD_IN_PROGRESS for ids of partitions it does not serve.
    pub fn describe_transactions(
        &self,
        request: &DescribeTransactionsRequest,
    ) -> DescribeTransactionsResponse {
        let transaction_states = request.transactional_ids.iter().map(|id| self.describe_one(id)).collect();
        DescribeTransactionsResponse { throttle_time_ms: 0, transaction_states }
    }

    fn describe_one(&self, id: &str) -> DescribedState {
        let mut described = DescribedState {
            transactional_id: id.to_owned(),
            producer_id: -1,
            producer_epoch: -1,
            transaction_start_time_ms: -1,
            ..DescribedState::default()
        };
        let found = if id.is_empty() {
            Err(ErrorCode::InvalidRequest)
        } else {
            self.active_term(id).and_then(|_| self.txns.get(id).ok_or(ErrorCode::TransactionalIdNotFound))
        };
        let txn = match found {
            Ok(txn) => txn,
            Err(error) => {
                described.error_code = error.code();
                return described;
            }
        };
        let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &txn.partitions {
            topics.entry(tp.topic.as_str()).or_default().push(tp.partition);
        }
        described.error_code = ErrorCode::None.code();
        described.transaction_state = txn.state.name().to_owned();
        described.transaction_timeout_ms = txn.txn_timeout_ms;
        described.transaction_start_time_ms = txn.txn_start_timestamp_ms;
        described.producer_id = txn.producer_id;
        described.producer_epoch = txn.producer_epoch;
        described.topics = topics
            .into_iter()
            .map(|(topic, partitions)| TopicData { topic: topic.to_owned(), partitions })
            .collect();
        described
    }

    /// ListTransactions: the ids of every served partition, filtered by state name,
    /// producer id and (v1, KIP-994) a minimum running time; unknown state names are
    /// listed back. COORDINATOR_LOAD_IN_PROGRESS while any partition is loading, as in
    /// Kafka. Sorted by transactional id.
    pub fn list_transactions(
        &self,
        request: &ListTransactionsRequest,
        now_ms: i64,
    ) -> ListTransactionsResponse {
        let mut response = ListTransactionsResponse::default();
        if self.partitions.values().any(|o| o.state == PartitionState::Loading) {
            response.error_code = ErrorCode::CoordinatorLoadInProgress.code();
            return response;
        }
        let mut states = Vec::new();
        for name in &request.state_filters {
            match TxnState::from_name(name) {
                Some(state) => states.push(state),
                None => response.unknown_state_filters.push(name.clone()),
            }
        }
        let duration_ms = request.duration_filter;
        let mut listed: Vec<ListedState> = self
            .txns
            .values()
            .filter(|t| t.state != TxnState::Dead)
            .filter(|t| {
                request.producer_id_filters.is_empty() || request.producer_id_filters.contains(&t.producer_id)
            })
            .filter(|t| request.state_filters.is_empty() || states.contains(&t.state))
            .filter(|t| duration_ms < 0 || now_ms.saturating_sub(t.txn_start_timestamp_ms) > duration_ms)
            .map(|t| ListedState {
                transactional_id: t.transactional_id.clone(),
                producer_id: t.producer_id,
                transaction_state: t.state.name().to_owned(),
            })
            .collect();
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        response.transaction_states = listed;
        response
    }
}
