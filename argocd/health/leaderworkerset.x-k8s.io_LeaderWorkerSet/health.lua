-- Argo CD health of a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), from the status the LWS controller writes:
-- kubernetes-sigs/lws v0.10.0, api/leaderworkerset/v1/leaderworkerset_types.go (condition types Available,
-- Progressing, UpdateInProgress) and pkg/controllers/leaderworkerset_controller.go (makeCondition: AllGroupsReady
-- "All replicas are ready", GroupsProgressing "Replicas are progressing", GroupsUpdating "Rolling Upgrade is in
-- progress"; Available excludes Progressing and UpdateInProgress; every condition carries observedGeneration).
-- A LeaderWorkerSet serves: it never finishes, and the controller writes no failed or suspended state (a crashing
-- group is recreated and shows as Progressing).
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local function condition(ctype)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == ctype and c.status == "True" then
      return c
    end
  end
  return nil
end

local status = obj.status or {}
local generation = obj.metadata.generation or 0
for _, c in ipairs(status.conditions or {}) do
  if (c.observedGeneration or 0) < generation then
    return {status = "Progressing", message = "Waiting for the LeaderWorkerSet controller to observe generation "
      .. generation}
  end
end
local groups = " (" .. (status.readyReplicas or 0) .. " of " .. ((obj.spec or {}).replicas or 1) .. " groups ready)"
local updating = condition("UpdateInProgress")
if updating ~= nil then
  return {status = "Progressing", message = (updating.message or "UpdateInProgress") .. groups}
end
local available = condition("Available")
if available ~= nil then
  return {status = "Healthy", message = available.message or "Available"}
end
local progressing = condition("Progressing")
if progressing ~= nil then
  return {status = "Progressing", message = (progressing.message or "Progressing") .. groups}
end
return {status = "Progressing", message = "Waiting for the LeaderWorkerSet controller to report the groups"}
