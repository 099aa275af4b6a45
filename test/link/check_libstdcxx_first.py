#!/usr/bin/python3
"""Fails when a built executable would bind a C++ standard library symbol to a LibTorch library.

pip's LibTorch wheels export their own copies of parts of libstdc++ (std::filesystem above all, linked
in statically by the toolchain that built them). An executable whose dynamic lookup order puts a torch
library before libstdc++ binds its std:: calls to those copies and crashes (seen in std::filesystem::
remove_all and in checkpoint restores). Two checks per executable in the build tree:

  1. NEEDED order: libstdc++.so.6 is a direct dependency and comes before every libtorch*/libc10*.
  2. Bindings: the dynamic linker resolves every symbol (ldd -r mode: relocations are processed, main
     never runs) and no symbol that libstdc++ defines is bound to another library.

With --self-test it first links a small program the wrong way (--as-needed, LibTorch before
libstdc++) and requires the checks to reject it, so that a check that cannot fail is noticed. That is
only possible where the LibTorch in use exports libstdc++ symbols (pip's does, Debian's does not); the
test says so when it is not.

Usage: check_libstdcxx_first.py BUILD_DIR [--self-test]
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

TORCH_LIB = re.compile(r"^lib(torch|c10)[^/]*\.so")
BINDING = re.compile(r"binding file (\S+) \[0\] to (\S+) \[0\]: normal symbol `([^']+)'")


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def is_dynamic_executable(path):
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return False
    except OSError:
        return False
    out = subprocess.run(["readelf", "-l", path], capture_output=True, text=True).stdout
    return "Requesting program interpreter" in out


def resolve_bindings(path):
    """Runs the dynamic linker in ldd -r mode; returns (bindings from the executable itself, loaded libs)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LD_TRACE_LOADED_OBJECTS="1", LD_WARN="yes", LD_BIND_NOW="yes",
                   LD_DEBUG="bindings", LD_DEBUG_OUTPUT=os.path.join(tmp, "bindings"))
        trace = subprocess.run([path], env=env, capture_output=True, text=True, timeout=120)
        libs = dict(re.findall(r"^\s*(\S+) => (\S+)", trace.stdout, re.M))
        # The trace covers every library's relocations (tens of MB for LibTorch); keep the executable's own.
        own = f"binding file {path} [0] to "
        bindings = []
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), errors="replace") as f:
                for line in f:
                    if own in line:
                        m = BINDING.search(line)
                        if m:
                            bindings.append((m.group(3), m.group(2)))
    return bindings, libs


def defined_symbols(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def problems_of(path, stdcxx_cache):
    """None for an executable that does not link LibTorch, else the list of problems (empty: fine)."""
    names = needed(path)
    torch = [i for i, n in enumerate(names) if TORCH_LIB.match(n)]
    if not torch:
        return None
    problems = []
    if "libstdc++.so.6" not in names:
        problems.append(f"libstdc++.so.6 is not among its NEEDED entries ({', '.join(names)})")
    elif names.index("libstdc++.so.6") > torch[0]:
        problems.append(f"NEEDED lists {names[torch[0]]} before libstdc++.so.6 ({', '.join(names)})")
    bindings, libs = resolve_bindings(path)
    stdcxx_path = libs.get("libstdc++.so.6")
    if stdcxx_path is None:
        problems.append("the dynamic linker did not load libstdc++.so.6")
        return problems
    if stdcxx_path not in stdcxx_cache:
        stdcxx_cache[stdcxx_path] = defined_symbols(stdcxx_path)
    stdcxx = stdcxx_cache[stdcxx_path]
    # Bindings to the executable itself are copy relocations (vtables, typeinfo copied into it): correct.
    own = {os.path.realpath(path), os.path.realpath(stdcxx_path)}
    wrong = sorted({(sym, lib) for sym, lib in bindings if sym in stdcxx and os.path.realpath(lib) not in own})
    if wrong:
        shown = "; ".join(f"{sym} -> {os.path.basename(lib)}" for sym, lib in wrong[:5])
        problems.append(f"{len(wrong)} libstdc++ symbols bind to other libraries, e.g. {shown}")
    return problems


def cmake_cache(build_dir):
    cache = {}
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^([^#/][^:]*):[^=]*=(.*)$", line.rstrip("\n"))
            if m:
                cache[m.group(1)] = m.group(2)
    return cache


def self_test(build_dir, executables, stdcxx_cache):
    """Links a canary with LibTorch ahead of libstdc++ and requires the checks to catch it."""
    torch_cpu = None
    for exe in executables:
        _, libs = resolve_bindings(exe)
        torch_cpu = next((p for n, p in libs.items() if n.startswith("libtorch_cpu.so")), None)
        if torch_cpu:
            break
    if torch_cpu is None:
        print("self-test skipped: no built executable loads libtorch_cpu.so")
        return True
    compiler = cmake_cache(build_dir)["CMAKE_CXX_COMPILER"]
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "canary.cpp")
        with open(source, "w") as f:
            f.write('#include <filesystem>\n#include <iostream>\n'
                    'int main() { std::cout << std::filesystem::path("/a/b").filename() << "\\n"; }\n')
        canary = os.path.join(tmp, "canary")
        # LibTorch first, libstdc++ left to the driver's implicit -lstdc++ at the end, --as-needed as Ubuntu's
        # g++ passes it: the link order that produced the crashes.
        subprocess.run([compiler, "-std=c++17", source, "-o", canary, "-Wl,--as-needed", torch_cpu,
                        "-Wl,--allow-shlib-undefined", "-Wl,-rpath," + os.path.dirname(torch_cpu)], check=True)
        out = subprocess.run(["nm", "-D", "--undefined-only", canary], capture_output=True, text=True).stdout
        wanted = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        if not wanted & defined_symbols(torch_cpu):
            print(f"self-test skipped: {torch_cpu} does not export the std::filesystem functions the canary calls "
                  "(a LibTorch built against the system's libstdc++), so a misordered link cannot misbind here")
            return True
        problems = problems_of(canary, stdcxx_cache)
    if not problems:
        print("self-test FAILED: a canary linked with LibTorch before libstdc++ passed the checks")
        return False
    print("self-test ok: the misordered canary was rejected: " + "; ".join(p[:100] for p in problems))
    return True


def main():
    build_dir = sys.argv[1]
    executables = []
    for root, dirs, files in os.walk(build_dir):
        dirs[:] = [d for d in dirs if d != "CMakeFiles"]
        for name in files:
            path = os.path.join(root, name)
            if os.access(path, os.X_OK) and is_dynamic_executable(path):
                executables.append(path)
    executables.sort()
    stdcxx_cache = {}
    ok = True
    if "--self-test" in sys.argv[2:]:
        ok = self_test(build_dir, executables, stdcxx_cache)
    checked = 0
    # Each check is mostly the dynamic linker resolving LibTorch (one core for about a second): one
    # executable per core at a time. Results are printed in path order.
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda exe: problems_of(exe, stdcxx_cache), executables))
    for exe, problems in zip(executables, results):
        if problems is None:
            continue
        checked += 1
        rel = os.path.relpath(exe, build_dir)
        if problems:
            ok = False
            for p in problems:
                print(f"FAIL {rel}: {p}")
        else:
            print(f"ok   {rel}")
    if checked == 0:
        print(f"no executable linked to LibTorch found under {build_dir}")
        return 1
    print(f"{checked} executables checked: " + ("libstdc++ comes first in all" if ok else "see FAIL lines; link "
          "libstdc++ ahead of LibTorch (CMakeLists.txt's add_link_options) and rebuild"))
    return 0 if ok else 1


sys.exit(main())
