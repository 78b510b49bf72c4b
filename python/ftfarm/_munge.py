"""A MUNGE credential of this process's user, as cli/remote.c makes it:
from libmunge (``munge_encode``, through ctypes), or, when the library
cannot be loaded, from the ``munge`` command.  munged's socket is the
config's ``control.munge_socket`` (None: the library's default)."""
import ctypes
import subprocess

from ._errors import Error

LIBRARY = "libmunge.so.2"
COMMAND = "munge"
_OPT_SOCKET = 8             # MUNGE_OPT_SOCKET (munge.h)
_COMMAND_TIMEOUT = 30.0     # seconds the munge command may take

_libs = {}                  # library name: its CDLL, or the OSError


def credential(payload, socket=None, library=None, command=None):
    """A credential (str) whose payload is PAYLOAD (str), made by munged
    at SOCKET.  Raises Error when munged refuses, or when neither LIBRARY
    nor COMMAND (None: the module's LIBRARY and COMMAND) can be used
    (both reasons are said)."""
    library = library or LIBRARY
    command = command or COMMAND
    lib = _load(library)
    if not isinstance(lib, OSError):
        return _from_library(lib, payload, socket)
    return _from_command(command, payload, socket, lib)


def _load(library):
    """LIBRARY's CDLL with its prototypes set, or the OSError of loading
    it (both remembered)."""
    if library not in _libs:
        try:
            _libs[library] = _prototypes(ctypes.CDLL(library))
        except OSError as e:
            _libs[library] = e
    return _libs[library]


def _prototypes(lib):
    """LIB with the types of the functions used here."""
    vp = ctypes.c_void_p
    lib.munge_ctx_create.restype = vp
    lib.munge_ctx_create.argtypes = []
    lib.munge_ctx_destroy.restype = None
    lib.munge_ctx_destroy.argtypes = [vp]
    lib.munge_ctx_strerror.restype = ctypes.c_char_p
    lib.munge_ctx_strerror.argtypes = [vp]
    lib.munge_strerror.restype = ctypes.c_char_p
    lib.munge_strerror.argtypes = [ctypes.c_int]
    lib.munge_encode.restype = ctypes.c_int
    lib.munge_encode.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p,
                                 ctypes.c_int]
    # munge_ctx_set is variadic: its arguments are typed at the call.
    lib.munge_ctx_set.restype = ctypes.c_int
    return lib


def _from_library(lib, payload, socket):
    """munge_encode's credential of PAYLOAD, as remote.c's credential()."""
    ctx = lib.munge_ctx_create()
    if not ctx:
        raise Error("munge: cannot create a context")
    cred = ctypes.c_void_p()
    try:
        if socket:
            lib.munge_ctx_set(ctypes.c_void_p(ctx), ctypes.c_int(_OPT_SOCKET),
                              ctypes.c_char_p(str(socket).encode()))
        data = payload.encode()
        rc = lib.munge_encode(ctypes.byref(cred), ctx, data, len(data))
        if rc != 0:
            why = lib.munge_ctx_strerror(ctx) or lib.munge_strerror(rc)
            raise Error("munge: " + why.decode(errors="replace"))
        return ctypes.string_at(cred.value).decode()
    finally:
        if cred.value:
            _libc().free(cred)
        lib.munge_ctx_destroy(ctx)


def _libc():
    """The C library (its free(), for what libmunge allocated)."""
    libc = _libs.get("libc")
    if libc is None:
        libc = _libs["libc"] = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
    return libc


def _from_command(command, payload, socket, lib_error):
    """The munge command's credential of PAYLOAD; LIB_ERROR says why the
    library was not used, should the command fail too."""
    argv = [command, "-s", payload] + (["-S", str(socket)] if socket else [])
    try:
        r = subprocess.run(argv, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=_COMMAND_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Error(f"munge: no way to make a credential: {lib_error}; "
                    f"{command}: {getattr(e, 'strerror', None) or e}") \
            from None
    if r.returncode != 0:
        why = r.stderr.strip() or f"{command} failed"
        raise Error("munge: " + why.removeprefix("munge: "))
    return r.stdout.strip()
