-- bench/tfb.d/pipeline.lua --- wrk sends DEPTH requests at once on each connection
--
-- Copyright (C) 2026 the plucky authors
-- SPDX-License-Identifier: LGPL-3.0-or-later
--
-- As TFB's plaintext test: wrk ... -s pipeline.lua -- 16.  The request wrk
-- would send, DEPTH times in one write; wrk counts each response.
function init(args)
  local depth = tonumber(args[1]) or 1
  local requests = {}
  for i = 1, depth do
    requests[i] = wrk.format()
  end
  batch = table.concat(requests)
end

function request()
  return batch
end
