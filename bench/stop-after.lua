-- bench/stop-after.lua --- make wrk stop after N responses
--
-- Copyright (C) 2026 the plucky authors
-- SPDX-License-Identifier: LGPL-3.0-or-later
--
-- wrk has no -n; this script gives it one.  Usage:
--
--   wrk -t1 -c100 -d600s -s bench/stop-after.lua URL -- N
--
-- Each wrk thread has its own Lua state, so the count is per thread: run
-- it with -t1 and N is the total across all connections.  The thread stops
-- once it has counted N responses; requests still in flight on the other
-- connections then are answered by the server but not counted by wrk (at
-- most -c of them).  wrk's report then covers just those N requests.  Keep -d as the bound in time: if the server is slow,
-- wrk stops at -d with fewer than N requests, and says how many.

-- wrk's main thread sleeps for -d, then stops the threads and reports;
-- SIGINT cuts that sleep short (wrk catches it and reports as usual).  So
-- when the count is reached we stop this thread and send SIGINT to the
-- main thread, whose thread id is the process id (tgkill targets exactly
-- that thread; a plain kill() might wake a worker thread instead).
local ffi = require("ffi")
ffi.cdef[[
int getpid(void);
int tgkill(int tgid, int tid, int sig);
]]
local SIGINT = 2

local limit = 1000000
local seen = 0

function init(args)
   if args[1] then limit = tonumber(args[1]) end
end

function response(status, headers, body)
   seen = seen + 1
   if seen == limit then
      local pid = ffi.C.getpid()
      ffi.C.tgkill(pid, pid, SIGINT)
      wrk.thread:stop()
   end
end
