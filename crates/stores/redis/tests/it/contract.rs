//! The EventLog contract suite (`weir_runtime::store_contract`) against
//! `RedisLog`, unchanged. (Redis answers over a socket, so this store does
//! not keep virtual time.)

use crate::server::redis;

weir_runtime::store_contract_tests!(redis);
