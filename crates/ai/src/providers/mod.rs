//! Provider adapters, one per wire API.
