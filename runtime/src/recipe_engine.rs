//! The wasm runtime as the pipeline's recipe engine.

use wazoo_sdk::abi::{CallerInfo, Reply, WatchRequest};

use super::{Budget, RecipeError, Runtime};
use crate::failure_log::{log_failure, Failure};
use wazoo_core::recipe::{
    error_reply, DeployedModule, ModuleMeta, ModuleReport, RecipeCounters, RecipeEngine, RecipeHost,
};

/// The reply for the pipeline; a failure is logged (rate-limited, see
/// [`crate::failure_log`]) with who called what.
fn reply_of(
    r: Result<super::Outcome, RecipeError>,
    module: &str,
    method: &str,
    session: i64,
) -> Reply {
    let reply = match &r {
        Ok(o) => o.reply.clone(),
        Err(e) => error_reply(e.code(), e.to_string()),
    };
    if let Reply::Error { code, message } = &reply {
        let kind = match &r {
            Err(e) => e.kind(),
            Ok(_) => "recipe",
        };
        log_failure(&Failure {
            module,
            method,
            session,
            code: *code,
            kind,
            message,
        });
    }
    reply
}

/// The budget of a first try on the member's thread (`try_call`): a
/// twentieth of the fuel, a zero deadline (which the epoch deadline rounds
/// up to the next tick), and tree batches of 64 KiB (a batch that reads or
/// writes a large node goes to a worker before it is copied whole).
fn quick_budget(rt: &Runtime) -> Budget {
    Budget {
        fuel: (rt.limits().fuel / 20).max(1),
        deadline: std::time::Duration::ZERO,
        message_bytes: 64 << 10,
    }
}

impl RecipeEngine for Runtime {
    fn call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        host: &mut dyn RecipeHost,
    ) -> Reply {
        let r = Runtime::call(self, module, method, args, caller, host);
        reply_of(r, module, method, caller.session)
    }

    fn on_watch(&mut self, module: &str, req: &WatchRequest, host: &mut dyn RecipeHost) -> Reply {
        let r = Runtime::on_watch(self, module, req, host);
        reply_of(r, module, "on_watch", req.caller.session)
    }

    /// Within a twentieth of the fuel, one epoch tick (5 ms by default) and
    /// 64 KiB batches: an ordinary step fits many times over; a heavy one
    /// costs the member's thread at most that before it goes to a worker.
    fn try_call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        host: &mut dyn RecipeHost,
    ) -> Option<Reply> {
        if self.awaited(module) {
            return None; // compiling or loading: wait for it off the member's thread
        }
        let quick = self.within(quick_budget(self));
        match Runtime::call(&quick, module, method, args, caller, host) {
            Err(e) if quick.over_budget(&e) => None,
            r => Some(reply_of(r, module, method, caller.session)),
        }
    }

    fn try_on_watch(
        &mut self,
        module: &str,
        req: &WatchRequest,
        host: &mut dyn RecipeHost,
    ) -> Option<Reply> {
        if self.awaited(module) {
            return None;
        }
        let quick = self.within(quick_budget(self));
        match Runtime::on_watch(&quick, module, req, host) {
            Err(e) if quick.over_budget(&e) => None,
            r => Some(reply_of(r, module, "on_watch", req.caller.session)),
        }
    }

    fn has_module(&self, module: &str) -> bool {
        self.module(module).is_some() || self.awaited(module)
    }

    /// The loaded modules, then, once a call found no module, the entry
    /// [`UNSERVED`](wazoo_core::recipe::UNSERVED) with those calls' counters.
    fn modules(&self) -> Vec<ModuleReport> {
        let unserved = self.unserved_counters();
        let unserved = (unserved != Default::default()).then(|| ModuleReport::unserved(unserved));
        self.stats()
            .into_iter()
            .map(|s| ModuleReport {
                name: s.info.name,
                version: s.info.version,
                hash: s.info.hash,
                methods: s.info.methods,
                calls: s.counters.calls,
                errors: s.counters.errors_total(),
                fuel_used: s.counters.fuel,
                loads: s.loads,
                counters: s.counters,
            })
            .chain(unserved)
            .collect()
    }

    fn seed_counters(&mut self, counters: &RecipeCounters) {
        Runtime::seed_counters(self, counters)
    }

    fn validate(&mut self, bytes: &[u8]) -> Result<ModuleMeta, String> {
        let info = self.validate_deploy(bytes)?;
        Ok(ModuleMeta {
            name: info.name,
            version: info.version,
            sha256: info.hash,
        })
    }

    fn validates_quickly(&mut self, bytes: &[u8]) -> bool {
        Runtime::validates_quickly(self, bytes)
    }

    fn deploy_name(&self, bytes: &[u8]) -> Option<String> {
        crate::manifest::read_manifest(bytes).ok().map(|m| m.name)
    }

    /// Swaps in the deployed module, compiling it off the caller's thread
    /// unless it is compiled already ([`Runtime::install_deployed`]);
    /// calls already running finish on the old one, calls made after wait
    /// for the new one.
    fn install(&mut self, name: &str, module: Option<&DeployedModule>) -> Result<(), String> {
        self.note_deployed(name, module);
        self.install_deployed(name, module.map(|m| (&m.bytes[..], m.sha256.as_str())))
    }
}
