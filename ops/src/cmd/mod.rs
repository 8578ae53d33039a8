//! One module per noun of the command line. Each command calls the admin API through
//! [`Client`](crate::client::Client) and returns a [`Report`](crate::report::Report) holding
//! the API's typed answer.

pub(crate) mod apply;
pub(crate) mod backup;
pub(crate) mod config;
pub(crate) mod deny;
pub(crate) mod fleet;
pub(crate) mod identity;
pub(crate) mod maintenance;
pub(crate) mod node;
pub(crate) mod peer;
pub(crate) mod queue;
pub(crate) mod repo;
pub(crate) mod status;
pub(crate) mod tenant;
