//! The linker that provides the host functions, and the checks at load
//! that a module imports only those and exports what the ABI requires.

use wasmtime::{Caller, Engine, ExternType, FuncType, Linker, Module, ModuleExport, ValType};
use wazoo_sdk::abi::imports;

use super::guest_imports::{host_log, host_notify, host_panic, host_tree, CallState};
use crate::error::LoadError;

pub(super) fn build_linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut l = Linker::new(engine);
    let m = imports::MODULE;
    let err = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    l.func_wrap(
        m,
        imports::TREE,
        |mut c: Caller<'_, CallState>, ptr: u32, len: u32| host_tree(&mut c, ptr, len),
    )
    .map_err(err)?;
    l.func_wrap(
        m,
        imports::NOTIFY,
        |mut c: Caller<'_, CallState>, session: i64, ptr: u32, len: u32| {
            host_notify(&mut c, session, ptr, len)
        },
    )
    .map_err(err)?;
    l.func_wrap(
        m,
        imports::LOG,
        |mut c: Caller<'_, CallState>, level: i32, ptr: u32, len: u32| {
            host_log(&mut c, level, ptr, len)
        },
    )
    .map_err(err)?;
    l.func_wrap(
        m,
        imports::PANIC,
        |mut c: Caller<'_, CallState>, ptr: u32, len: u32| -> wasmtime::Result<()> {
            Err(host_panic(&mut c, ptr, len))
        },
    )
    .map_err(err)?;
    Ok(l)
}

/// The signatures the ABI fixes, as "(params) -> (results)".
fn sig(ft: &FuncType) -> String {
    let name = |v: ValType| match v {
        ValType::I32 => "i32".to_string(),
        ValType::I64 => "i64".to_string(),
        ValType::F32 => "f32".to_string(),
        ValType::F64 => "f64".to_string(),
        other => format!("{other}"),
    };
    let p: Vec<String> = ft.params().map(name).collect();
    let r: Vec<String> = ft.results().map(name).collect();
    format!("({}) -> ({})", p.join(", "), r.join(", "))
}

fn expected_import(name: &str) -> Option<&'static str> {
    Some(match name {
        imports::TREE => "(i32, i32) -> (i64)",
        imports::NOTIFY => "(i64, i32, i32) -> (i32)",
        imports::LOG => "(i32, i32, i32) -> ()",
        imports::PANIC => "(i32, i32) -> ()",
        _ => return None,
    })
}

pub(super) fn check_imports(module: &Module) -> Result<(), LoadError> {
    for imp in module.imports() {
        let unknown = || LoadError::UnknownImport {
            module: imp.module().into(),
            name: imp.name().into(),
        };
        if imp.module() != imports::MODULE {
            return Err(unknown());
        }
        let expected = expected_import(imp.name()).ok_or_else(unknown)?;
        match imp.ty() {
            ExternType::Func(ft) if sig(&ft) == expected => {}
            ExternType::Func(ft) => {
                return Err(LoadError::BadImport {
                    module: imp.module().into(),
                    name: imp.name().into(),
                    expected: expected.into(),
                    found: sig(&ft),
                })
            }
            _ => return Err(unknown()),
        }
    }
    Ok(())
}

pub(super) fn export_func(
    module: &Module,
    name: &str,
    expected: &str,
    required: bool,
) -> Result<Option<ModuleExport>, LoadError> {
    let missing = || LoadError::MissingExport {
        name: name.into(),
        expected: expected.into(),
    };
    let Some(ty) = module.get_export(name) else {
        return if required { Err(missing()) } else { Ok(None) };
    };
    match ty {
        ExternType::Func(ft) if sig(&ft) == expected => Ok(module.get_export_index(name)),
        ExternType::Func(ft) => Err(LoadError::BadExport {
            name: name.into(),
            expected: expected.into(),
            found: sig(&ft),
        }),
        other => Err(LoadError::BadExport {
            name: name.into(),
            expected: expected.into(),
            found: format!("{other:?}"),
        }),
    }
}
