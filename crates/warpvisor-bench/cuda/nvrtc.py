import ctypes, sys, os, nvidia.cuda_nvrtc
lib = os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib")
so = [f for f in os.listdir(lib) if f.startswith("libnvrtc.so")][0]
n = ctypes.CDLL(os.path.join(lib, so))
src = open(sys.argv[1]).read().encode()
prog = ctypes.c_void_p()
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, sys.argv[1].encode(), 0, None, None) == 0
opts = [b"--gpu-architecture=compute_70", b"-default-device"]
arr = (ctypes.c_char_p * len(opts))(*opts)
r = n.nvrtcCompileProgram(prog, len(opts), arr)
sz = ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log = ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
if r != 0: print(log.value.decode()); sys.exit(1)
n.nvrtcGetPTXSize(prog, ctypes.byref(sz)); ptx = ctypes.create_string_buffer(sz.value); n.nvrtcGetPTX(prog, ptx)
sys.stdout.write(ptx.value.decode())
