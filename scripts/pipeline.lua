-- wrk script: HTTP/1.1 pipelining, as TechEmpower's plaintext test runs
-- it. Each request wrk writes is `depth` copies of the request (the
-- argument after `--`, default 16), sent back to back; wrk counts every
-- response. Used by scripts/db_bench.sh:
--   wrk -s scripts/pipeline.lua http://127.0.0.1:18084/plaintext -- 16
init = function(args)
   local depth = tonumber(args[1]) or 16
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format()
   end
   req = table.concat(r)
end

request = function()
   return req
end
