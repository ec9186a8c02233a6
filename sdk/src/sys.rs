//! The raw host imports (module `"wazoo"`). Only wasm32 has them; on other
//! targets the SDK builds (so recipe crates can be type-checked and unit-tested
//! natively) and the host is `testing::Harness` (calling it outside a
//! harness step panics).

#[cfg(target_arch = "wasm32")]
mod imp {
    #[link(wasm_import_module = "wazoo")]
    extern "C" {
        #[link_name = "tree"]
        fn wazoo_tree(ptr: *const u8, len: usize) -> u64;
        #[link_name = "notify"]
        fn wazoo_notify(session: i64, ptr: *const u8, len: usize) -> i32;
        #[link_name = "log"]
        fn wazoo_log(level: i32, ptr: *const u8, len: usize);
        #[link_name = "panic"]
        fn wazoo_panic(ptr: *const u8, len: usize);
    }

    pub fn tree(req: &[u8]) -> Vec<u8> {
        let (ptr, len) = crate::abi::unpack(unsafe { wazoo_tree(req.as_ptr(), req.len()) });
        unsafe { crate::rt::take(ptr, len) }
    }
    pub fn notify(session: i64, payload: &[u8]) -> i32 {
        unsafe { wazoo_notify(session, payload.as_ptr(), payload.len()) }
    }
    pub fn log(level: i32, msg: &str) {
        unsafe { wazoo_log(level, msg.as_ptr(), msg.len()) }
    }
    pub fn panic(msg: &str) {
        unsafe { wazoo_panic(msg.as_ptr(), msg.len()) }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    // Natively, host calls are answered by a `testing::Harness` step
    // running on this thread; anywhere else they panic.
    pub fn tree(req: &[u8]) -> Vec<u8> {
        crate::testing::tree(req)
    }
    pub fn notify(session: i64, payload: &[u8]) -> i32 {
        crate::testing::notify(session, payload)
    }
    pub fn log(_level: i32, msg: &str) {
        eprintln!("{msg}")
    }
    pub fn panic(_msg: &str) {}
}

pub use imp::*;
