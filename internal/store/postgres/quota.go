package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// TODO(quotas): replaced by the owner quota and usage tables.

var errQuotasTODO = errors.New("owner quotas are not stored yet")

func (r reader) OwnerQuotas(ctx context.Context, owner string) (quota.Overrides, error) {
	return quota.Overrides{}, errQuotasTODO
}

func (r reader) OwnerUsage(ctx context.Context, owner string, since time.Time) (chat.Usage, error) {
	return chat.Usage{}, errQuotasTODO
}

func (r reader) OwnerStats(ctx context.Context, since time.Time) ([]store.OwnerStat, error) {
	return nil, errQuotasTODO
}

func (r reader) CountChats(ctx context.Context, owner string) (int, error) { return 0, errQuotasTODO }

func (t *tx) SetOwnerQuotas(ctx context.Context, owner string, o quota.Overrides) error {
	return errQuotasTODO
}
