"""Anomaly mode's backend-independent helpers: what a node keeps of its forward call, and the
warning shown when its backward fails. Both engines (the core's, through csrc/python/node_bind.cpp,
and the reference's) call these; the public switches are fastgrad.autograd.anomaly_mode."""

import os
import traceback
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def forward_traceback():
    """The Python stack of the op being recorded, as traceback.format_list lines (PyTorch's
    metadata["traceback_"]), without fastgrad's own innermost frames: the user's call comes last."""
    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_PACKAGE):
        frames.pop()
    return traceback.format_list(frames)


def warn_failed_node(node_name, forward_stack):
    """PyTorch's warning for a node whose backward failed in anomaly mode, with the traceback of the
    forward call that recorded it when anomaly mode was on then."""
    if forward_stack is None:
        message = (
            f"Error detected in {node_name}. No forward pass information available. Enable detect anomaly "
            "during forward pass for more information."
        )
    else:
        message = f"Error detected in {node_name}. Traceback of forward call that caused the error:\n" + "".join(
            forward_stack
        )
    warnings.warn(message, UserWarning, stacklevel=2)
