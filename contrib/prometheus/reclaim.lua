-- redis-reclaim metrics for prometheus-redis-exporter's -script option (redis_exporter 1.45:
-- the script runs with EVAL on every scrape and its reply, alternating names and values, all
-- strings, becomes redis_script_values{key="<name>"} <value>).
--
-- Names it returns (contrib/prometheus/prometheus.yml relabels them into the series the alert
-- rules and the dashboard use):
--   <field>                                 every total of INFO reclaim (reclaim_<field>)
--   policy_<field>:<db>:<stream>:<group>    every number of a per-policy line of INFO reclaim
--   policy_status:<db>:<stream>:<group>:<state>   1 (the policy's status word: `waiting` of
--                                           `waiting: no group <group>`)
-- Stream and group names come escaped by the module (%XX for % , = : spaces, control
-- characters and bytes that are not UTF-8), so they never hold a ':' and are valid UTF-8.
--
-- It never fails: a Redis without the module gives an empty reply (an error would make the
-- exporter report redis_up 0). Cost: one INFO reclaim, O(policies), no PEL walk.

local result = {}
local info = redis.pcall('INFO', 'reclaim')
if type(info) ~= 'string' then
  return result
end

local function put(name, value)
  result[#result + 1] = name
  result[#result + 1] = value
end

for line in string.gmatch(info, '[^\r\n]+') do
  local n, rest = string.match(line, '^reclaim_policy_(%d+):(.*)$')
  if n then
    local f = {}
    for k, v in string.gmatch(rest, '([^,=]+)=([^,]*)') do
      f[k] = v
    end
    if f.db and f.stream and f.group then
      local id = ':' .. f.db .. ':' .. f.stream .. ':' .. f.group
      for k, v in pairs(f) do
        if k ~= 'db' and k ~= 'stream' and k ~= 'group' and string.match(v, '^%d+$') then
          put('policy_' .. k .. id, v)
        end
      end
      local word = f.status and string.match(f.status, '^[a-z-]+')
      if word then
        put('policy_status' .. id .. ':' .. word, '1')
      end
    end
  else
    local k, v = string.match(line, '^reclaim_([%w_]+):(%d+)$')
    if k then
      put(k, v)
    end
  end
end
return result
