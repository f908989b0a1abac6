//! Integration tests of `coding-agent`, one test binary (each module is one former test file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[path = "all/acp.rs"]
mod acp;

#[path = "all/admission.rs"]
mod admission;

#[path = "all/cli_dropin.rs"]
mod cli_dropin;

#[path = "all/compaction.rs"]
mod compaction;

#[path = "all/config_local.rs"]
mod config_local;

#[path = "all/auth_cmd.rs"]
mod auth_cmd;
#[path = "all/auth_oauth.rs"]
mod auth_oauth;
#[path = "all/catalogue.rs"]
mod catalogue;
#[path = "all/config_models.rs"]
mod config_models;

#[path = "all/config_resolve.rs"]
mod config_resolve;

#[path = "all/config_settings.rs"]
mod config_settings;

#[path = "all/config_system_prompt.rs"]
mod config_system_prompt;

#[path = "all/export_html.rs"]
mod export_html;

#[path = "all/floors.rs"]
mod floors;

#[path = "all/extensions.rs"]
mod extensions;
#[path = "all/extensions_api.rs"]
mod extensions_api;
#[path = "all/extensions_fail_closed.rs"]
mod extensions_fail_closed;
#[path = "all/extensions_tree.rs"]
mod extensions_tree;
#[path = "all/upstream_examples.rs"]
mod upstream_examples;

#[path = "all/extension_events.rs"]
mod extension_events;

#[path = "all/extensions_last.rs"]
mod extensions_last;

#[path = "all/extension_provider_auth.rs"]
mod extension_provider_auth;
#[path = "all/extension_providers.rs"]
mod extension_providers;
#[path = "all/hostile_input.rs"]
mod hostile_input;

#[path = "all/local_model.rs"]
mod local_model;

#[path = "all/codemode_parts.rs"]
mod codemode_parts;
#[path = "all/mcp.rs"]
mod mcp;
#[path = "all/mcp_exposures.rs"]
mod mcp_exposures;

#[path = "all/mcp_ops.rs"]
mod mcp_ops;

#[path = "all/mcp_reference.rs"]
mod mcp_reference;

#[path = "all/models_pull.rs"]
mod models_pull;

#[path = "all/packages.rs"]
mod packages;

#[path = "all/permissions.rs"]
mod permissions;

#[path = "all/print.rs"]
mod print;

#[path = "all/proc_hygiene.rs"]
mod proc_hygiene;

#[path = "all/real_packages.rs"]
mod real_packages;

#[path = "all/resources_skills.rs"]
mod resources_skills;

#[path = "all/resources_templates.rs"]
mod resources_templates;

#[path = "all/rpc_basic.rs"]
mod rpc_basic;

#[path = "all/rpc_harden.rs"]
mod rpc_harden;
#[path = "all/rpc_stdout.rs"]
mod rpc_stdout;

#[path = "all/rpc_event_details.rs"]
mod rpc_event_details;

#[path = "all/rpc_images.rs"]
mod rpc_images;

#[path = "all/rpc_models.rs"]
mod rpc_models;

#[path = "all/rpc_responses.rs"]
mod rpc_responses;

#[path = "all/rpc_codex_ws.rs"]
mod rpc_codex_ws;

#[path = "all/rpc_retry.rs"]
mod rpc_retry;

#[path = "all/rpc_provider_settings.rs"]
mod rpc_provider_settings;

#[path = "all/provider_cases.rs"]
mod provider_cases;
#[path = "all/rpc_providers_google_mistral.rs"]
mod rpc_providers_google_mistral;

#[path = "all/rpc_bedrock.rs"]
mod rpc_bedrock;
#[path = "all/rpc_bedrock_creds.rs"]
mod rpc_bedrock_creds;

#[path = "all/rpc_runtime.rs"]
mod rpc_runtime;

#[path = "all/rpc_session.rs"]
mod rpc_session;

#[path = "all/rpc_session_swap.rs"]
mod rpc_session_swap;

#[path = "all/rpc_sigkill.rs"]
mod rpc_sigkill;

#[path = "all/rpc_tools.rs"]
mod rpc_tools;

#[path = "all/session_resume.rs"]
mod session_resume;

#[path = "all/session_settle.rs"]
mod session_settle;

#[path = "all/session_store.rs"]
mod session_store;

#[path = "all/session_unknown_fields.rs"]
mod session_unknown_fields;

#[path = "all/tools_bash.rs"]
mod tools_bash;

#[path = "all/tools_common.rs"]
mod tools_common;

#[path = "all/tools_edit.rs"]
mod tools_edit;

#[path = "all/tools_files.rs"]
mod tools_files;

#[path = "all/tools_search.rs"]
mod tools_search;

#[path = "all/tools_validate.rs"]
mod tools_validate;

#[path = "all/trust_cwd.rs"]
mod trust_cwd;

#[path = "all/sandbox.rs"]
mod sandbox;
