"""vulture's allow-list: names it reports unused that are used where it cannot see (issue 33).

.ci/run checks `vulture openai_responses_mcp.py .ci/vulture_allowlist.py --min-confidence 60`.
Anything else it reports is dead: delete it. Add a name here only with the reason it is alive.
"""
# ruff: noqa: B018, F821

# http.server calls these by name: do_<METHOD> through getattr, the rest as its own hooks and
# class attributes, overridden by HttpHandler and HttpServer.
_.do_DELETE, _.do_GET, _.do_HEAD, _.do_OPTIONS, _.do_PATCH, _.do_POST, _.do_PUT
_.disable_nagle_algorithm, _.version_string, _.log_request, _.log_message
_.send_error, explain  # send_error(code, message=None, explain=None): http.server's signature
_.request_queue_size, _.address_family, _.process_request, _.server_name

# _json.make_scanner (C) reads these from its context object, _ScanContext.
_.object_hook, _.object_pairs_hook, _.parse_float, _.parse_int, _.parse_constant

# The task table's size in bytes: read by tests/test_tasks_limits.py and bench/soak.py.
_.stored_bytes
